"""Signal checks on synthetic audio whose answer is known by construction."""
import numpy as np
import pytest
from sounds import RATE, buzz, silence, sweep

from engine.checks.signal import check_signal
from engine.checks.verdict import Thresholds


def checks(wave, **limits):
    return {c.name: c for c in check_signal(wave, RATE, Thresholds(**limits))}


@pytest.mark.parametrize("wave", [sweep(3.0), np.concatenate([silence(0.1), buzz(3.0), silence(0.1)])],
                         ids=["sine sweep", "speech-like buzz"])
def test_clean_audio_passes_every_signal_check(wave):
    found = checks(wave)
    assert all(c.passed for c in found.values()), found
    assert found["clipping"].score == 0 and found["pauses"].score == 0 and found["dropouts"].score == 0


def test_clipping_is_the_fraction_at_full_scale():
    wave = np.clip(sweep(3.0, amplitude=2.0), -1, 1)  # |2 sin| >= 1 where |sin| >= 1/2: 2/3 of the time
    found = checks(wave)
    assert not found["clipping"].passed and found["clipping"].score == pytest.approx(2 / 3, abs=0.01)
    assert found["pauses"].passed and found["dropouts"].passed


def test_a_long_pause_is_measured_and_named():
    wave = np.concatenate([silence(0.1), buzz(1.5), silence(2.0), buzz(1.5), silence(0.1)])
    pause = checks(wave)["pauses"]
    assert not pause.passed and pause.score == pytest.approx(2.0, abs=0.01)  # 5 ms hops
    assert "2.0 s of silence at 1.6 s" in pause.detail
    assert checks(wave, max_pause_s=2.5)["pauses"].passed  # the user's threshold decides


def test_a_dropout_inside_sound_is_caught_but_the_edges_are_not():
    wave = np.concatenate([silence(0.1), buzz(3.0), silence(0.1)])
    wave[int(1.5 * RATE):int(1.58 * RATE)] = 0  # 80 ms of nothing in the middle of a syllable
    found = checks(wave)
    assert not found["dropouts"].passed and found["dropouts"].score == 1
    assert "1.50 s" in found["dropouts"].detail
    assert found["pauses"].passed and found["pauses"].score == pytest.approx(0.08, abs=0.01)


def test_a_pause_that_fades_is_not_a_dropout():
    fade = np.linspace(1, 0, int(0.05 * RATE), dtype=np.float32)  # 50 ms fades, as speech does
    a, b = buzz(1.0), buzz(1.0)
    a[-len(fade):] *= fade
    b[:len(fade)] *= fade[::-1]
    found = checks(np.concatenate([silence(0.1), a, silence(0.2), b, silence(0.1)]))
    assert found["dropouts"].passed and found["pauses"].passed


def test_a_silent_take_fails():
    found = checks(silence(2.0))
    assert not found["pauses"].passed and found["pauses"].detail == "the take is silent"
