"""The voice check with a tiny RANDOM WavLM x-vector model: the code path and the similarity's
invariants (identical clips score 1, different clips less), not a real model's accuracy."""
import numpy as np
import pytest
import torch
from sounds import RATE, buzz, sweep

from engine.checks.voice import SpeakerEncoder, check_voice, similarity


@pytest.fixture(scope="module")
def encoder(tiny_speaker_model):
    return SpeakerEncoder(tiny_speaker_model, "cpu")


def test_identical_clips_are_the_same_voice(encoder):
    a, b = encoder.embed(buzz(2.0), RATE), encoder.embed(buzz(2.0), RATE)
    assert a.shape == (8,) and a.norm().item() == pytest.approx(1.0, abs=1e-6)
    assert similarity(a, b) == pytest.approx(1.0, abs=1e-6)


def test_different_clips_are_less_similar(encoder):
    ref = encoder.embed(buzz(2.0, f0=140), RATE)
    noise = np.random.default_rng(0).standard_normal(2 * RATE).astype(np.float32) * 0.1
    others = [buzz(2.0, f0=230), sweep(2.0), noise]
    scores = [similarity(ref, encoder.embed(w, RATE)) for w in others]
    assert all(s < 1 - 1e-3 for s in scores), scores


def test_the_check_compares_with_the_threshold():
    ref = torch.tensor([1.0, 0.0])
    near, far = torch.tensor([0.8, 0.6]), torch.tensor([0.0, 1.0])
    ok = check_voice(near, ref, min_similarity=0.75)
    assert ok.passed and ok.score == pytest.approx(0.8) and ok.label() == "voice 0.80"
    bad = check_voice(far, ref, min_similarity=0.75)
    assert not bad.passed and "another speaker" in bad.detail


def test_the_rate_is_converted(encoder):
    """The model hears 16 kHz: the same clip given at 24 and at 48 kHz embeds (almost) alike."""
    from engine.audio.resample import resample

    clip = buzz(2.0)
    at48 = resample(torch.from_numpy(clip)[None], RATE, 48000)[0].numpy()
    assert similarity(encoder.embed(clip, RATE), encoder.embed(at48, 48000)) > 0.999
