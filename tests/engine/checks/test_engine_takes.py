"""Best of N and retakes through the real engine on the demo checkpoint (CPU, eager): N takes come
from one batched generation and each equals a lone render with its seed; the kept take is the
best-scored one. Speaker model: tiny and random (tests/conftest.py), so scores test the path, not voices."""
import numpy as np
import pytest

from engine.checks.checker import Checker
from engine.checks.policy import CheckMode, CheckPolicy
from engine.checks.takes import Checks
from engine.checks.verdict import Thresholds
from engine.checks.voice import SpeakerEncoder
from engine.config import GenerationConfig
from engine.constants import SAMPLE_RATE

TEXT = "Hello there, nice to meet you."
CFG = GenerationConfig(num_step=8, seed=11)


@pytest.fixture(scope="module")
def checker(tiny_speaker_model):
    return Checker(None, SpeakerEncoder(tiny_speaker_model), {"words": "not in this test"})


def test_batched_takes_equal_lone_renders_with_their_seeds(engine, voice):
    takes = engine.takes(TEXT, voice, config=CFG, n=3)
    lone = [engine.synthesize(TEXT, voice, config=CFG.replace(seed=11 + j)) for j in range(3)]
    assert [t.seed for t in takes] == [11, 12, 13]
    for take, single in zip(takes, lone):
        assert all(a.equal(b) for a, b in zip(take.tokens, single.tokens))  # token identity, exact
        np.testing.assert_array_equal(take.audio, single.audio)
    assert not takes[0].tokens[0].equal(takes[1].tokens[0])  # different seeds, different takes


def test_a_long_text_without_a_voice_keeps_each_take_on_its_own_first_chunk(engine):
    """No voice, chunked plan: later chunks use chunk 0 of the same take as their reference."""
    cfg = CFG.replace(num_step=4, audio_chunk_duration=1.0, audio_chunk_threshold=1.0)
    text = "One sentence here. Another sentence there. And a third one."
    takes = engine.takes(text, config=cfg, n=2)
    assert len(takes[0].tokens) > 1
    for j, take in enumerate(takes):
        lone = engine.synthesize(text, config=cfg.replace(seed=11 + j))
        assert all(a.equal(b) for a, b in zip(take.tokens, lone.tokens))


def test_best_of_n_streams_the_best_scored_take(engine, voice, checker):
    policy = CheckPolicy(CheckMode.BEST_OF_N, candidates=3)
    chunks = list(engine.stream(TEXT, voice, config=CFG, checks=Checks(policy, checker)))
    reference = checker.embed(engine.reference_audio(voice), SAMPLE_RATE)
    for chunk in chunks:
        seed = CFG.seed + chunk.index
        takes = engine.takes(chunk.text, voice, config=CFG.replace(seed=seed), n=3)
        verdicts = [checker.check(t.audio, SAMPLE_RATE, chunk.text, policy.thresholds, reference=reference)
                    for t in takes]
        best = min(range(3), key=lambda j: verdicts[j].rank_key())
        assert chunk.seed == seed + best and chunk.verdict.attempts == 3
        assert chunk.verdict.rank_key() == verdicts[best].rank_key()
        np.testing.assert_array_equal(chunk.audio, takes[best].audio)
        assert [c.name for c in chunk.verdict.checks] == ["voice", "clipping", "pauses", "dropouts"]


def test_retake_renders_again_only_while_a_check_fails(engine, voice, checker):
    strict = CheckPolicy(CheckMode.RETAKE, retries=2, thresholds=Thresholds(min_similarity=1.01))  # never passes
    chunk = next(engine.stream(TEXT, voice, config=CFG, checks=Checks(strict, checker)))
    assert chunk.verdict.attempts == 3 and not chunk.verdict.passed
    lenient = CheckPolicy(CheckMode.RETAKE, retries=2, thresholds=Thresholds(
        min_similarity=-1.0, max_pause_s=60, max_dropouts=99, max_clipped=1.0))  # always passes
    chunk = next(engine.stream(TEXT, voice, config=CFG, checks=Checks(lenient, checker)))
    assert chunk.verdict.attempts == 1 and chunk.verdict.passed and chunk.seed == CFG.seed


def test_checks_off_is_the_plain_stream(engine, voice, checker):
    plain = list(engine.stream(TEXT, voice, config=CFG))
    off = list(engine.stream(TEXT, voice, config=CFG, checks=Checks(CheckPolicy(CheckMode.OFF), checker)))
    assert all(c.verdict is None for c in off)
    for a, b in zip(plain, off):
        np.testing.assert_array_equal(a.audio, b.audio)


def test_with_a_graph_runner_takes_are_one_batch_of_lone_renders(engine, voice, monkeypatch):
    """Through the graph runner the N takes share one packed batch (one forward per step), and each equals
    its lone render: its noise is keyed by its own seed. Here the runner is the static loop without graphs (CPU)."""
    from engine.lm.runner import StaticRunner

    runner = StaticRunner(engine.lm)
    layouts = []  # the sequences of every layout the running batch was packed into
    load = runner.load
    monkeypatch.setattr(runner, "load", lambda packed, cfg: layouts.append(int((packed.schedule.sum(0) > 0).sum()))
                        or load(packed, cfg))
    monkeypatch.setattr(engine, "runner", runner)
    takes = engine.takes(TEXT, voice, config=CFG, n=2)
    assert layouts == [2] and [t.seed for t in takes] == [11, 12]
    lone = engine.synthesize(TEXT, voice, config=CFG.replace(seed=12))
    assert all(a.equal(b) for a, b in zip(takes[1].tokens, lone.tokens))
