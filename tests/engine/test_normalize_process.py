"""WeTextProcessing in a child process (normalize_process): the app's threads keep running during a run, Stop
abandons the run at once and the next call gets a fresh child, a child that dies is replaced."""
import multiprocessing
import threading
import time

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
    """The child's pipe, doing `action()` once a request has been sent: while the child works on it."""

    def __init__(self, conn, action):
        self.conn, self.action = conn, action

    def send(self, request):
        self.conn.send(request)
        self.action()

    def __getattr__(self, name):
        return getattr(self.conn, name)


def after_send(monkeypatch, action):
    started = normalize_process._started
    def started_and_watched(language):
        child = started(language)
        return normalize_process._Child(child.process, ActsAfterSend(child.conn, action))
    monkeypatch.setattr(normalize_process, "_started", started_and_watched)


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
    first_child = normalize_process._child.process
    after_send(monkeypatch, cancel.set)  # Stop, pressed while the child reads the next run's text
    with pytest.raises(Cancelled):
        next(parts)
    monkeypatch.undo()
    assert not first_child.is_alive()  # killed, not left to finish
    assert normalize_process._child.process.is_alive()  # its successor already started, loading its grammar
    # the next call is not answered by (nor waits for) the stopped run: its own text, from a new child
    assert normalize_text(SHORT, "en") == "I have two cats."
    assert normalize_process._child.process.pid != first_child.pid


def test_a_child_that_dies_during_a_call_fails_that_call_and_is_replaced(monkeypatch):
    normalize_text(SHORT, "en")
    after_send(monkeypatch, normalize_process._child.process.kill)  # as if it crashed or ran out of memory
    with pytest.raises(TextInputError, match="ended unexpectedly"):
        normalize_text(LONG, "en")
    monkeypatch.undo()
    assert normalize_text(SHORT, "en") == "I have two cats."


def test_a_child_that_died_while_idle_is_replaced():
    normalize_text(SHORT, "en")
    child = normalize_process._child.process
    child.kill()
    child.join()
    assert normalize_text(SHORT, "en") == "I have two cats."
    assert normalize_process._child.process.pid != child.pid


def test_warming_starts_the_child_that_the_first_call_then_uses():
    warm("en")
    warmed = normalize_process._child.process  # started at once: its grammar loads while the app goes on
    warm("en")  # a second warm-up keeps it
    assert normalize_text(SHORT, "en") == "I have two cats."
    assert normalize_process._child.process is warmed


def test_warming_for_a_language_without_grammars_starts_nothing():
    warm("de")  # num2words: in-process, nothing to load
    assert normalize_process._child is None


def quick_first_run(text: str) -> str:
    """A text whose first run (up to the first sentence end after 100 characters) is quick, the rest long."""
    return "This sentence has words and nothing else to read. " * 3 + text
