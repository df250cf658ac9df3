"""engine.audio.resample: windowed-sinc resampling equal to torchaudio's default method."""
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from error_budget import assert_same_rounding
from safetensors.torch import load_file

from engine.audio.resample import resample, resampled_length

RATES = [8000, 11025, 16000, 22050, 24000, 44100, 48000, 96000]


def direct_sinc(x: np.ndarray, orig: int, new: int) -> np.ndarray:
    """The defining sum, in float64: y[j] = sum_i x[i] h(i/orig - j/new), h a Hann-windowed sinc
    with cutoff 0.99 * min(orig, new) / 2 Hz, truncated at 6 zero crossings."""
    cutoff = 0.99 * min(orig, new)
    n_out = math.ceil(len(x) * new / orig)
    i = np.arange(len(x))
    y = np.empty(n_out)
    for j in range(n_out):
        t = np.clip((i / orig - j / new) * cutoff, -6, 6)
        h = np.sinc(t) * np.cos(np.pi * t / 12) ** 2 * cutoff / orig
        y[j] = x @ h
    return y


@pytest.mark.parametrize("orig,new", [(24000, 16000), (16000, 24000), (44100, 24000), (8000, 24000),
                                      (22050, 24000), (96000, 24000), (48000, 24000)])
def test_matches_the_defining_sum(orig, new):
    x = np.random.default_rng(orig + new).standard_normal(300).astype(np.float32)
    got = resample(torch.from_numpy(x), orig, new).numpy()
    want = direct_sinc(x.astype(np.float64), orig, new)
    assert got.shape == want.shape
    # the filters are computed in float32, as torchaudio does: ~1e-5 off exact for large gcd ratios
    np.testing.assert_allclose(got, want, atol=3e-5)


@pytest.mark.parametrize("orig", RATES)
def test_a_tone_survives(orig):
    t = np.arange(orig * 2) / orig
    got = resample(torch.from_numpy(np.sin(2 * np.pi * 440 * t).astype(np.float32)), orig, 24000).numpy()
    want = np.sin(2 * np.pi * 440 * np.arange(len(got)) / 24000)
    interior = slice(240, -240)  # the edges see zero padding
    np.testing.assert_allclose(got[interior], want[interior], atol=2e-3)


def test_lengths_follow_torchaudio_float32_rounding():
    assert resampled_length(1000, 24000, 16000) == 667
    assert resampled_length(7, 44100, 24000) == 4
    # 1_400_009 * 80 / 147 = 761909.66...: exact in float64, float32 rounds it up to 761909.6875
    for n in (1, 2, 147, 1_400_009, 1_400_100):
        assert resampled_length(n, 44100, 24000) == math.ceil(np.float32(80 * n / 147))
    # a ratio whose fraction float32 cannot hold: torchaudio returns one sample fewer than exact
    n = next(n for n in range(1_400_000, 1_401_000) if math.ceil(np.float32(80 * n / 147)) != math.ceil(80 * n / 147))
    assert resampled_length(n, 44100, 24000) == math.ceil(80 * n / 147) - 1
    assert resample(torch.zeros(n), 44100, 24000).shape[-1] == resampled_length(n, 44100, 24000)


def test_batches_and_identity():
    x = torch.randn(2, 3, 1001)
    y = resample(x, 44100, 24000)
    assert y.shape == (2, 3, resampled_length(1001, 44100, 24000))
    torch.testing.assert_close(y[1, 2], resample(x[1, 2], 44100, 24000), atol=1e-6, rtol=0)
    assert resample(x, 24000, 24000) is x
    with pytest.raises(TypeError):
        resample(torch.zeros(10, dtype=torch.int16), 16000, 24000)


def test_matches_torchaudio_goldens():
    goldens = load_file(Path(__file__).parents[1] / "data" / "goldens" / "resample.safetensors")
    pairs = sorted({key.rsplit(".", 1)[0] for key in goldens})
    assert len(pairs) >= 6
    for pair in pairs:
        orig, new = map(int, pair.split("_to_"))
        got = resample(goldens[f"{pair}.input"], orig, new)
        exact = resample(goldens[f"{pair}.input"].double(), orig, new)
        assert_same_rounding(got, goldens[f"{pair}.output"], exact, pair)
