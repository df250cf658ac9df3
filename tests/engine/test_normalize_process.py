"""WeTextProcessing in child processes (normalize_process): the app's threads keep running during a run, Stop
abandons the run at once and the next call gets a fresh child, a child that dies is replaced, two children answer
two calls at once, a child gives back a long run's memory. Whose turn it is: test_normalize_turns.py."""
import dataclasses
import multiprocessing
import threading
import time
from pathlib import Path

import pytest
from extras import needs_tn

from engine.errors import Cancelled, TextInputError
from engine.text import normalize_process
from engine.text.normalize import normalize_text, normalized_parts, warm

pytestmark = needs_tn

SENTENCE = "She paid $1,250.75 for the 2 chairs on Dec. 4, 2026 at 7:45 a.m. "
LONG = SENTENCE * 60  # ~4,000 characters: seconds of grammar work, the GIL held throughout when run in-process
SHORT = "I have 2 cats."


@pytest.fixture(autouse=True)
def no_child_left():
    normalize_process.stop()
    yield
    normalize_process.stop()
    assert multiprocessing.active_children() == []  # killed and joined: no zombie, no leak


class Ticker:
    """A thread that counts its own turns (1 ms sleeps) until stopped: how far other threads get meanwhile."""

    def __init__(self):
        self.turns, self.stopped = 0, threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()

    def _tick(self):
        while not self.stopped.is_set():
            self.turns += 1
            time.sleep(0.001)

    def stop(self):
        self.stopped.set()
        self.thread.join()


class ActsAfterSend:
    """A child's pipe, doing `action()` once the first request has been sent through it or another so watched:
    while the child works on it."""

    def __init__(self, conn, action, done):
        self.conn, self.action, self.done = conn, action, done

    def send(self, request):
        self.conn.send(request)
        if not self.done:
            self.done.append(True)
            self.action()

    def __getattr__(self, name):
        return getattr(self.conn, name)


def after_send(monkeypatch, action):
    pool, done = normalize_process._pool, []
    started = pool.started
    def started_and_watched(slot, language):
        child = started(slot, language)
        return dataclasses.replace(child, conn=ActsAfterSend(child.conn, action, done))
    monkeypatch.setattr(pool, "started", started_and_watched)


def children() -> list:
    """The children's processes, of the slots that have one."""
    return [child.process for child in normalize_process._pool.children if child is not None]


def test_other_threads_keep_running_during_a_long_normalisation():
    normalize_text(SHORT, "en")  # the child started and its grammar loaded: only the long run is watched
    ticker = Ticker()
    turns_at_start = ticker.turns
    spoken = normalize_text(LONG, "en")
    turns_during = ticker.turns - turns_at_start  # read as the result arrives
    ticker.stop()
    assert spoken.count("fourth of december") == 60
    assert turns_during >= 300  # in-process, pynini keeps the GIL: a handful of turns at most


def test_stop_abandons_the_run_and_the_next_call_gets_a_fresh_child(monkeypatch):
    cancel = threading.Event()
    parts = normalized_parts(quick_first_run(LONG), "en", cancel)
    next(parts)  # the first run's part: the child is up
    (first_child,) = children()
    after_send(monkeypatch, cancel.set)  # Stop, pressed while the child reads the next run's text
    with pytest.raises(Cancelled):
        next(parts)
    monkeypatch.undo()
    assert not first_child.is_alive()  # killed, not left to finish
    (successor,) = children()
    assert successor.is_alive()  # already started, loading its grammar
    # the next call is not answered by (nor waits for) the stopped run: its own text, from a new child
    assert normalize_text(SHORT, "en") == "I have two cats."
    assert children() == [successor] and successor.pid != first_child.pid


def test_a_child_that_dies_during_a_call_fails_that_call_and_is_replaced(monkeypatch):
    normalize_text(SHORT, "en")
    (child,) = children()
    after_send(monkeypatch, child.kill)  # as if it crashed or ran out of memory
    with pytest.raises(TextInputError, match="ended unexpectedly"):
        normalize_text(LONG, "en")
    monkeypatch.undo()
    assert normalize_text(SHORT, "en") == "I have two cats."


def test_a_child_that_died_while_idle_is_replaced():
    normalize_text(SHORT, "en")
    (child,) = children()
    child.kill()
    child.join()
    assert normalize_text(SHORT, "en") == "I have two cats."
    (successor,) = children()
    assert successor.pid != child.pid


def test_warming_starts_the_children_that_the_first_call_then_uses():
    warm("en")
    warmed = children()  # started at once: their grammars load while the app goes on
    assert len(warmed) == normalize_process.CHILDREN
    warm("en")  # a second warm-up keeps them
    assert normalize_text(SHORT, "en") == "I have two cats."
    assert children() == warmed


def test_warming_for_a_language_without_grammars_starts_nothing():
    warm("de")  # num2words: in-process, nothing to load
    assert children() == []


def test_two_children_answer_two_calls_at_once_and_a_stop_kills_only_its_own(monkeypatch):
    warm("en")
    warmed, cancel, answered = children(), threading.Event(), []

    def meanwhile():  # while one child reads the long text, a call from another thread
        other = threading.Thread(target=lambda: answered.append(normalize_text(SHORT, "en")))
        other.start()
        other.join(60)  # a guard: with one child it would wait for the long run
        assert answered == ["I have two cats."]  # answered by the other child
        cancel.set()

    after_send(monkeypatch, meanwhile)
    with pytest.raises(Cancelled):
        normalize_text(LONG, "en", cancel)
    monkeypatch.undo()
    (kept,) = [process for process in warmed if process.is_alive()]  # the stopped run's child killed
    assert kept in children() and len(children()) == 2  # and replaced, the other kept


def lent_children(monkeypatch) -> list:
    """The processes of the children lent to calls from now on, in turn."""
    pool, lent = normalize_process._pool, []
    started = pool.started
    def started_and_noted(slot, language):
        child = started(slot, language)
        lent.append(child.process)
        return child
    monkeypatch.setattr(pool, "started", started_and_noted)
    return lent


@pytest.mark.parametrize("ended", ["stopped", "died"])
def test_the_call_after_a_run_that_ended_its_child_goes_to_the_child_that_kept_running(monkeypatch, ended):
    """Not to the one started in the ended child's place, which loads its grammar for seconds: the last child given
    back was lent first, so the next call waited for that load while the other child sat ready."""
    warm("en")
    warmed, cancel = children(), threading.Event()
    lent = lent_children(monkeypatch)
    normalize_text(SHORT, "en")
    (used,) = lent
    after_send(monkeypatch, cancel.set if ended == "stopped" else used.kill)
    with pytest.raises(Cancelled if ended == "stopped" else TextInputError):
        normalize_text(LONG, "en", cancel)
    monkeypatch.undo()
    (kept,) = [process for process in warmed if process is not used]
    lent = lent_children(monkeypatch)
    assert normalize_text(SHORT, "en") == "I have two cats."
    assert lent == [kept]


def quick_first_run(text: str) -> str:
    """A text whose first run (up to the first sentence end after 100 characters) is quick, the rest long."""
    return "This sentence has words and nothing else to read. " * 3 + text


def resident_mb(pid: int) -> float:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]) / 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads a process's memory in /proc (Linux)")
def test_a_child_gives_back_a_long_runs_memory():
    normalize_text(SHORT, "en")
    (child,) = children()
    loaded = resident_mb(child.pid)
    normalize_text(LONG, "en")  # its working memory: ~250 MB more
    normalize_text(SHORT, "en")  # may be served before the memory is given back: the child does that once idle
    deadline = time.monotonic() + 30  # idle TRIM_WHEN_IDLE_S, then the trim (72 ms after 8,000 characters)
    while resident_mb(child.pid) >= loaded + 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert resident_mb(child.pid) < loaded + 50
