"""A streamed answer's take checks: the voice check's reference is made once per answer (not per clause, and not at
all without a speaker model to compare with), the budget reaches every clause's choice, and a budget of 0 turns the
checks off for the answer. Stand-in engine and checkers on the real GPU worker."""
import asyncio
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from app.answer import StreamedAnswer
from app.api.voices import ChosenVoice
from app.settings import Settings
from app.worker import GpuWorker
from engine.checks.checker import Checker
from engine.config import GenerationConfig
from engine.voice import Voice

CLAUSES = ["The first clause is here.", "The second one follows.", "And the third one ends it."]


class StandInEngine:
    """n takes of a clause, each a constant signal; counts the reference renders (a codec decode on a GPU)."""

    mode, backend, is_demo = SimpleNamespace(value="hifi"), "stand-in", True

    def __init__(self):
        self.reference_renders, self.takes = 0, []

    def render(self, request, n=1, cancel=None):
        self.takes.append((request.text, n))
        return [SimpleNamespace(audio=np.full(2400, 0.1, np.float32), sample_rate=24000, tokens=[None])
                for _ in range(n)]

    def reference_audio(self, voice):
        self.reference_renders += 1
        return np.full(2400, 0.1, np.float32)


class StandInSpeaker:
    def __init__(self):
        self.embedded = 0

    def embed(self, wave, rate):
        self.embedded += 1
        return torch.ones(4)


def speak(engine, checker, settings, check_budget_ms=1000, missing=None):
    """The answer's checks() and its spoken clauses."""
    worker = GpuWorker(name="test-answer-checks")
    checks = SimpleNamespace(checker=lambda: checker, missing=lambda: missing or {})
    ctx = SimpleNamespace(host=SimpleNamespace(engine=engine), worker=worker, settings=settings, checks=checks,
                          history=SimpleNamespace(add=lambda *args, **meta: SimpleNamespace(id="stored")))
    voice = Voice(tokens=torch.zeros(8, 25, dtype=torch.long), transcript="A saved voice.", rms=None)

    async def run():
        answer = StreamedAnswer(ctx, ChosenVoice(voice=voice, instruct=None, label="saved"), language=None,
                                config=GenerationConfig(seed=1), lane="test", check_budget_ms=check_budget_ms)
        answer.add(" ".join(CLAUSES))
        answer.finish()
        return answer.checks(), [clause async for clause in answer.clauses()]

    try:
        return asyncio.run(run())
    finally:
        worker.shutdown()


BEST_OF_2 = Settings(check_mode="best_of_n", check_candidates=2)


def test_the_reference_is_rendered_and_embedded_once_per_answer():
    engine, speaker = StandInEngine(), StandInSpeaker()
    _, spoken = speak(engine, Checker(None, speaker, {"words": "no recogniser here"}), BEST_OF_2)
    assert [c.text for c in spoken] == CLAUSES and engine.takes == [(text, 2) for text in CLAUSES]
    assert engine.reference_renders == 1
    assert speaker.embedded == 1 + 2 * len(CLAUSES)  # the reference once, then each take of each clause
    assert all(c.checks["checks"]["voice"]["passed"] for c in spoken)


def test_without_a_speaker_model_the_reference_is_never_rendered():
    engine = StandInEngine()
    _, spoken = speak(engine, Checker(None, None, {"voice": "no speaker model here"}), BEST_OF_2)
    assert engine.reference_renders == 0
    assert all(c.checks["skipped"] == {"voice": "no speaker model here"} for c in spoken)


class SlowSpeaker(StandInSpeaker):
    def embed(self, wave, rate):
        time.sleep(0.01)  # at least 10 ms: longer than the 1 ms budget below, on any machine
        return super().embed(wave, rate)


def test_the_budget_reaches_each_clause_and_the_answer_says_what_is_off():
    """A budget of 1 ms: each clause's first take is checked, the second is not (a check takes longer than what
    is left of the budget after the first)."""
    missing = {"words": SimpleNamespace(repo_id="whisper-somewhere")}
    checks, spoken = speak(StandInEngine(), Checker(None, SlowSpeaker(), {"words": "no recogniser"}), BEST_OF_2,
                           check_budget_ms=1, missing=missing)
    assert checks == {"mode": "best_of_n", "budget_ms": 1,
                      "off": {"words": "its model (whisper-somewhere) is not on this computer"}}
    assert all(c.checks["over_budget"] == "1 of 2 takes not checked within the 1 ms budget" for c in spoken)


@pytest.mark.parametrize("settings, budget", [(BEST_OF_2, 0), (Settings(), 1000)])
def test_a_budget_of_0_or_the_apps_checks_off_leave_the_clauses_unchecked(settings, budget):
    engine = StandInEngine()
    checks, spoken = speak(engine, None, settings, check_budget_ms=budget)
    assert checks == {"mode": "off"}
    assert engine.takes == [(text, 1) for text in CLAUSES] and all(c.checks is None for c in spoken)
