"""A streamed answer renders each clause on the model loaded when the clause's job runs: a mode switch between
two clauses (its load is a job of the same worker) moves the rest of the answer to the new model, and the old one
is not kept alive by the answer."""
import asyncio
from types import SimpleNamespace

import numpy as np

from app.answer import StreamedAnswer
from app.api.voices import ChosenVoice
from app.settings import Settings
from app.worker import GpuWorker
from engine.config import GenerationConfig


class StandInEngine:
    """Renders a clause as a constant: its own level, so the audio says which model made it."""

    mode, backend, is_demo = SimpleNamespace(value="hifi"), "stand-in", True

    def __init__(self, level: float):
        self.level, self.rendered = level, []

    def render(self, request, cancel=None):
        self.rendered.append(request.text)
        return [SimpleNamespace(audio=np.full(240, self.level, np.float32), tokens=None)]


def test_a_mode_switch_mid_answer_moves_the_rest_to_the_new_model():
    worker = GpuWorker(name="test-answer")
    old, new = StandInEngine(0.25), StandInEngine(0.5)
    host = SimpleNamespace(engine=old)
    ctx = SimpleNamespace(host=host, worker=worker, settings=Settings(),
                          history=SimpleNamespace(add=lambda *args, **meta: SimpleNamespace(id="stored")))
    chosen = ChosenVoice(voice=None, instruct="female", label="designed")  # attributes: no voice carried on

    async def speak():
        answer = StreamedAnswer(ctx, chosen, language=None, config=GenerationConfig(seed=1), lane="test")
        answer.add("The first clause is here. ")
        clauses = answer.clauses()
        first = await anext(clauses)
        worker.submit(lambda cancel: setattr(host, "engine", new), lane="test")  # the mode switch's load job
        answer.add("And the second one comes after it.")
        answer.finish()
        return [first] + [clause async for clause in clauses]

    try:
        spoken = asyncio.run(speak())
    finally:
        worker.shutdown()
    assert [c.text for c in spoken] == ["The first clause is here.", "And the second one comes after it."]
    assert old.rendered == ["The first clause is here."] and new.rendered == ["And the second one comes after it."]
    assert [int(c.pcm[0]) for c in spoken] == [round(0.25 * 32767), round(0.5 * 32767)]
