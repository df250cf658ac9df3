"""A normalisation child gives a run's memory back (malloc_trim) once it is idle, not while a call waits for it:
the trim took 72 ms after 8,000 characters. The child's loop (normalize_process._serve) driven through a scripted
pipe, the grammar stood in for: no WeTextProcessing needed. The real child's memory: test_normalize_process.py."""
import pytest

from engine.text import normalize, normalize_process


class ScriptedPipe:
    """The child's end of its pipe: hands out `requests` in order (then EOF, which ends the child), says whether a
    call is waiting as `waiting` lists it poll by poll, and logs what the child does through it and `trim`."""

    def __init__(self, requests: list[str], waiting: list[bool]):
        self.requests, self.waiting = list(requests), list(waiting)
        self.log, self.poll_timeouts = [], []

    def poll(self, timeout: float) -> bool:
        self.poll_timeouts.append(timeout)
        return self.waiting.pop(0)

    def recv(self):
        if not self.requests:
            raise EOFError
        return self.requests.pop(0), "en", False

    def send(self, answer):
        self.log.append(("answer", answer[1]))

    def trim(self):
        self.log.append("trim")


@pytest.fixture
def serve(monkeypatch):
    monkeypatch.setattr(normalize, "wetext_grammar", lambda language: None)
    monkeypatch.setattr(normalize, "outside_markup", lambda text, grammar, pinyin: text.upper())
    monkeypatch.setattr(normalize_process.signal, "signal", lambda *args: None)  # the test runner keeps its Ctrl+C

    def run(pipe: ScriptedPipe) -> list:
        monkeypatch.setattr(normalize_process, "_memory_giver", lambda: pipe.trim)
        normalize_process._serve(pipe, "en")
        assert pipe.poll_timeouts == [normalize_process.TRIM_WHEN_IDLE_S] * len(pipe.poll_timeouts)
        assert not pipe.waiting, "the child asked fewer times than scripted"
        return pipe.log

    return run


def test_a_call_waiting_when_the_run_is_answered_is_served_before_the_memory_is_given_back(serve):
    pipe = ScriptedPipe(["long text", "next"], waiting=[True, False])
    assert serve(pipe) == [("answer", "LONG TEXT"), ("answer", "NEXT"), "trim"]


def test_an_idle_child_gives_the_memory_back_after_each_run(serve):
    pipe = ScriptedPipe(["one", "two"], waiting=[False, False])
    assert serve(pipe) == [("answer", "ONE"), "trim", ("answer", "TWO"), "trim"]


def test_a_child_that_has_run_nothing_gives_nothing_back(serve):
    assert serve(ScriptedPipe([], waiting=[])) == []


def test_a_run_that_failed_gives_its_memory_back_too(serve, monkeypatch):
    def fails(text, grammar, pinyin):
        raise RuntimeError("grammar broke")
    monkeypatch.setattr(normalize, "outside_markup", fails)
    log = serve(ScriptedPipe(["one"], waiting=[False]))
    assert [entry if entry == "trim" else entry[0] for entry in log] == ["answer", "trim"]
