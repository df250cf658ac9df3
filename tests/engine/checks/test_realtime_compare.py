"""The Realtime check (engine/checks/realtime.py) on the tiny random demo model, on the CPU: both modes run the
eager path there, so they agree exactly; a Realtime whose weights are perturbed is the planted drift. The
verdict's limits are checked at their exact values."""
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.checks import realtime as rc
from engine.checks.realtime import (
    MAX_MEL_DB,
    MIN_TOKEN_AGREEMENT,
    MIN_VOICE_SIMILARITY,
    RealtimeCheck,
    check_realtime,
    measure,
    render_check_sentence,
)
from engine.constants import DEMO_MODEL
from engine.engine import Engine
from engine.errors import Cancelled
from tools.realtime_drift_scan import perturb  # noise of a fraction of each weight matrix's spread


def load(mode: str) -> Engine:
    return Engine.load(DEMO_MODEL, device="cpu", mode=mode)


def no_speaker():
    return None, "no speaker model here"


@pytest.fixture(scope="module")
def hifi_render():
    return render_check_sentence(load("hifi"))


def test_the_same_model_in_both_modes_agrees_exactly(hifi_render):
    result = check_realtime(load("realtime"), lambda: load("hifi"), no_speaker)
    assert result.token_agreement == 1.0 and result.mel_db == 0.0
    assert result.voice_similarity is None and result.voice_skipped == "no speaker model here"
    assert result.verdict == "fine" and result.drifted == []
    assert result.summary() == "tokens 100 % equal to High fidelity, mel 0.0 dB: fine"


def test_the_check_sentence_renders_the_same_each_time(hifi_render):
    """Fixed text, designed voice, seed and position_temperature 0: nothing random is left."""
    again = render_check_sentence(load("hifi"))
    assert torch.equal(torch.cat(again.tokens, -1), torch.cat(hifi_render.tokens, -1))
    assert rc.check_config().position_temperature == 0.0 and rc.check_config().seed == rc.CHECK_SEED


def test_a_perturbed_realtime_is_a_drift(hifi_render):
    drifting = load("realtime")
    perturb(drifting, 0.5)
    steps = []
    result = check_realtime(drifting, lambda: load("hifi"), no_speaker, report=steps.append)
    assert result.token_agreement < MIN_TOKEN_AGREEMENT, result
    assert result.verdict == "drift" and "tokens" in result.drifted
    assert result.mel_db > 0.0  # the two renders' spectrograms are compared, not one with itself
    assert f"(at least {MIN_TOKEN_AGREEMENT * 100:.0f} %)" in result.limits_crossed()
    assert steps == ["rendering the check sentence in Realtime", "loading High fidelity beside it",
                     "rendering the check sentence in High fidelity", "comparing the two"]


class FixedSpeaker:
    """Embeds the first clip it hears as e0 and every later one as `other`."""

    def __init__(self, other: torch.Tensor):
        self.other, self.calls = other, 0

    def embed(self, wave, sample_rate):
        self.calls += 1
        return torch.tensor([1.0, 0.0]) if self.calls == 1 else self.other


def test_the_voice_is_compared_when_the_speaker_model_is_here(hifi_render):
    same = measure(hifi_render, hifi_render, FixedSpeaker(torch.tensor([1.0, 0.0])))
    assert same.voice_similarity == pytest.approx(1.0) and same.voice_skipped is None and same.verdict == "fine"
    assert same.summary() == "tokens 100 % equal to High fidelity, mel 0.0 dB, voice 1.00: fine"
    other = measure(hifi_render, hifi_render, FixedSpeaker(torch.tensor([0.8, 0.6])))  # cosine 0.8
    assert other.voice_similarity == pytest.approx(0.8) and other.drifted == ["voice"]


def test_the_real_speaker_encoder_hears_identical_renders_as_one_voice(hifi_render, tiny_speaker_model):
    from engine.checks.voice import SpeakerEncoder

    result = measure(hifi_render, hifi_render, SpeakerEncoder(tiny_speaker_model, "cpu"))
    assert result.voice_similarity == pytest.approx(1.0, abs=1e-5)


FINE = RealtimeCheck(token_agreement=MIN_TOKEN_AGREEMENT, mel_db=MAX_MEL_DB, voice_similarity=MIN_VOICE_SIMILARITY)


@pytest.mark.parametrize("change, crossed", [
    ({}, []),  # every measure exactly at its limit still passes
    ({"token_agreement": MIN_TOKEN_AGREEMENT - 1e-9}, ["tokens"]),
    ({"mel_db": MAX_MEL_DB + 1e-9}, ["mel"]),
    ({"voice_similarity": MIN_VOICE_SIMILARITY - 1e-9}, ["voice"]),
    ({"voice_similarity": None, "voice_skipped": "no model"}, []),  # not measured: not held against it
    ({"token_agreement": 0.1, "mel_db": 9.0}, ["tokens", "mel"]),
])
def test_the_limits(change, crossed):
    result = replace(FINE, **change)
    assert result.drifted == crossed and result.verdict == ("drift" if crossed else "fine")
    assert RealtimeCheck.from_dict(result.to_dict()) == result


def test_what_crossed_is_said_with_its_limit():
    result = RealtimeCheck(token_agreement=0.31, mel_db=4.25, voice_similarity=0.5)
    assert result.limits_crossed() == (f"tokens 31 % equal (at least {MIN_TOKEN_AGREEMENT * 100:.0f} %), "
                                       f"mel 4.2 dB (at most {MAX_MEL_DB:.1f} dB), "
                                       f"voice 0.50 (at least {MIN_VOICE_SIMILARITY:.2f})")


class HeardSpeaker:
    """Embeds each clip as its own loudness, and keeps the clips it heard."""

    def __init__(self):
        self.heard = []

    def embed(self, wave, sample_rate):
        self.heard.append(wave)
        return torch.tensor([1.0, float(np.abs(wave).mean())])


def test_the_voice_compares_the_realtime_render_with_the_high_fidelity_one(hifi_render):
    quieter = replace(hifi_render, audio=hifi_render.audio * 0.5)
    speaker = HeardSpeaker()
    measure(quieter, hifi_render, speaker)
    assert [id(wave) for wave in speaker.heard] == [id(quieter.audio), id(hifi_render.audio)]


def test_the_check_stops_when_it_is_cancelled():
    """At shutdown or a model switch the worker cancels the check: it stops at the next step of either render, and
    High fidelity is not even loaded when the stop came first."""
    stop, loads = threading.Event(), []
    stop.set()
    with pytest.raises(Cancelled):
        check_realtime(load("realtime"), lambda: loads.append("hifi") or load("hifi"), no_speaker, cancel=stop)
    assert loads == []

    def load_then_stop():  # the stop comes while High fidelity loads
        engine = load("hifi")
        stop.set()
        return engine

    stop.clear()
    with pytest.raises(Cancelled):
        check_realtime(load("realtime"), load_then_stop, no_speaker, cancel=stop)
