"""A streamed answer is kept in the History as one entry, as a speech request is: its clauses' text joined and
exactly the audio sent, with the voice, mode, seed and where it came from; an answer stopped before its end is not
kept. Stand-in engine on the real GPU worker and the real History."""
import asyncio
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from app.answer import StreamedAnswer
from app.api.voices import ChosenVoice
from app.history import History
from app.settings import Settings
from app.ui.history import history_rows
from app.worker import GpuWorker
from engine.config import MAX_SEED, GenerationConfig
from engine.constants import SAMPLE_RATE


class StandInEngine:
    """Clause i (in order of rendering) is 0.1 s of the constant (i + 1) / 10: the audio says which clause it is."""

    mode, backend, is_demo = SimpleNamespace(value="hifi"), "stand-in", False

    def __init__(self):
        self.rendered, self.seeds = 0, []

    def render(self, request, cancel=None):
        self.rendered += 1
        self.seeds.append(request.config.seed)
        return [SimpleNamespace(audio=np.full(SAMPLE_RATE // 10, self.rendered / 10, np.float32), tokens=None)]


def answer_in(tmp_path, pieces, finish=True, *, seed=7, engine=None):
    """(History, the answer's spoken clauses) after `pieces` are sent, then `finish` (or the answer cancelled
    after its first clause), rendered by `engine` (a StandInEngine if None)."""
    worker, history = GpuWorker(name="test-answer-history"), History(tmp_path)
    ctx = SimpleNamespace(host=SimpleNamespace(engine=engine or StandInEngine()), worker=worker, settings=Settings(),
                          history=history)

    async def speak():
        answer = StreamedAnswer(ctx, ChosenVoice(voice=None, instruct="female", label="designed: female"),
                                language="en", config=GenerationConfig(seed=seed), lane="wyoming")
        for piece in pieces:
            answer.add(piece)
        spoken = []
        if finish:
            answer.finish()
            return [clause async for clause in answer.clauses()]
        async for clause in answer.clauses():
            spoken.append(clause)
            answer.cancel()
            break
        return spoken

    try:
        return history, asyncio.run(speak())
    finally:
        worker.shutdown()


def test_an_answer_is_one_history_entry_with_its_text_and_the_audio_sent(tmp_path):
    history, spoken = answer_in(tmp_path, ["The lights are off", ". The door is", " locked. Good night"])
    assert [c.text for c in spoken] == ["The lights are off.", "The door is locked.", "Good night"]
    [entry] = history.entries()
    assert entry.text == "The lights are off. The door is locked. Good night"
    audio, rate = sf.read(entry.audio, dtype="int16")
    assert rate == SAMPLE_RATE and np.array_equal(audio, np.concatenate([c.pcm for c in spoken]))
    meta = entry.meta
    assert meta["voice"] == "designed: female" and meta["seed"] == 7 and meta["language"] == "en"
    assert meta["source"] == "wyoming" and meta["backend"] == "stand-in" and meta["audio_s"] == pytest.approx(0.3)
    assert meta["first_audio_s"] == spoken[0].engine_s and meta["checks"] is None


@pytest.mark.parametrize("pieces, text", [
    (["你好。", "今天天气", "很好。"], "你好。今天天气很好。"),  # written without spaces: none put between its clauses
    (["\n  First line.\n", "Second", " line."], "First line.\nSecond line."),  # as written, but for its ends
])
def test_an_answer_is_kept_with_its_text_as_it_was_written(tmp_path, pieces, text):
    history, spoken = answer_in(tmp_path, pieces)
    assert len(spoken) == 2 and [entry.text for entry in history.entries()] == [text]


def test_an_answer_stopped_before_its_end_is_not_kept(tmp_path):
    history, spoken = answer_in(tmp_path, ["One. Two. Three"], finish=False)
    assert len(spoken) == 1 and history.entries() == []


def test_the_history_table_says_an_answer_came_from_wyoming(tmp_path):
    history, _ = answer_in(tmp_path, ["Hello there."])
    rows, _ = history_rows(SimpleNamespace(history=history))
    assert rows[0][2] == "designed: female · via Wyoming"


@pytest.mark.parametrize("seed, seeds", [(7, [7, 8, 9]), (MAX_SEED - 1, [MAX_SEED - 1, MAX_SEED, 0])])
def test_clause_i_is_seeded_i_places_after_the_answers_seed_from_0_again_past_the_largest(tmp_path, seed, seeds):
    engine = StandInEngine()
    _, spoken = answer_in(tmp_path, ["One. Two. Three."], seed=seed, engine=engine)
    assert len(spoken) == 3 and engine.seeds == seeds
