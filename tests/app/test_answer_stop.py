"""An answer closed before its end stops its jobs left, waiting or running, and the log says so (CLOSED_EARLY with
its lane: the leave tests of the WebSocket, the speech API and Wyoming read it); an answer spoken to its end has
nothing left to stop, and logs nothing (the worker hands out a job's result once the job has left it:
tests/app/test_worker.py)."""
import asyncio
import logging
from types import SimpleNamespace

from test_answer_history import StandInEngine

from app.answer import CLOSED_EARLY, StreamedAnswer
from app.api.voices import ChosenVoice
from app.settings import Settings
from app.worker import GpuWorker
from engine.config import GenerationConfig
from engine.errors import Cancelled

WAIT_S = 60  # generous: nothing here is timed, the waits only end a broken test


class StopsLaterClauses(StandInEngine):
    """The first clause at once; every later one runs until it is stopped."""

    def render(self, request, cancel=None):
        if self.rendered:
            cancel.wait(WAIT_S)
            raise Cancelled("Stopped.")
        return super().render(request, cancel)


def an_answer(worker) -> StreamedAnswer:
    ctx = SimpleNamespace(host=SimpleNamespace(engine=StopsLaterClauses()), worker=worker, settings=Settings(),
                          history=SimpleNamespace(add=lambda *args, **meta: SimpleNamespace(id="stored")))
    return StreamedAnswer(ctx, ChosenVoice(voice=None, instruct="female", label="designed"), language="en",
                          config=GenerationConfig(seed=3), lane="test-lane")


def test_an_answer_closed_mid_way_stops_its_running_clause_and_logs_it(caplog):
    worker = GpuWorker(name="test-answer-stop")

    async def leave_after_the_first_clause():
        answer = an_answer(worker)
        answer.add("One. Two. Three")  # "One." and "Two." queued; "Three" waits for more text
        clauses = answer.clauses()
        await anext(clauses)
        return answer.cancel()

    try:
        with caplog.at_level(logging.INFO, logger="app.answer"):
            stopped = asyncio.run(leave_after_the_first_clause())
    finally:
        worker.shutdown()
    assert stopped == 1  # "Two.", running until stopped
    assert [r.getMessage() for r in caplog.records] == [CLOSED_EARLY % "test-lane"]


def test_an_answer_spoken_to_its_end_has_nothing_to_stop(caplog):
    worker = GpuWorker(name="test-answer-stop")

    async def speak_then_close():
        answer = an_answer(worker)
        answer.add("Only one clause.")
        answer.finish()
        spoken = [clause async for clause in answer.clauses()]
        return spoken, answer.cancel()

    try:
        with caplog.at_level(logging.INFO, logger="app.answer"):
            spoken, stopped = asyncio.run(speak_then_close())
    finally:
        worker.shutdown()
    assert [c.text for c in spoken] == ["Only one clause."]
    assert stopped == 0 and CLOSED_EARLY % "test-lane" not in caplog.text


def test_an_answer_closed_before_any_clause_was_complete_stops_nothing_and_logs_nothing(caplog):
    worker = GpuWorker(name="test-answer-stop")
    try:
        with caplog.at_level(logging.INFO, logger="app.answer"):
            answer = an_answer(worker)
            answer.add("Half a clau")  # nothing queued yet
            stopped = answer.cancel()
    finally:
        worker.shutdown()
    assert stopped == 0 and caplog.records == []
