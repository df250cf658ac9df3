"""Band-limited resampling by windowed sinc interpolation.

Numerically the same method as torchaudio.functional.resample with its defaults (6 zero
crossings, rolloff 0.99, Hann window), which upstream OmniVoice and the HiggsAudioV2 codec use;
torchaudio itself is not available to us.

Each output sample y[j] = sum_i x[i] h(i/orig - j/new) with h a low-passed sinc. After dividing
both rates by their gcd the filter repeats every `new` outputs, shifted by `orig` inputs, so the
whole operation is one strided conv1d with a bank of `new` filters (one per output phase).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

ZERO_CROSSINGS = 6  # sinc lobes kept on each side of the centre
ROLLOFF = 0.99  # cutoff as a fraction of the lower Nyquist frequency


@lru_cache(maxsize=16)
def sinc_filter_bank(orig: int, new: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, int]:
    """Filters (new, 1, 2*width + orig) for gcd-reduced rates, and the context `width` in input
    samples on each side. Computed in `dtype` with the same operation order as torchaudio."""
    cutoff = min(orig, new) * ROLLOFF
    width = math.ceil(ZERO_CROSSINGS * orig / cutoff)
    taps = torch.arange(-width, width + orig, dtype=dtype, device=device)[None, None] / orig  # (1, 1, K)
    phases = torch.arange(0, -new, -1, dtype=dtype, device=device)[:, None, None] / new  # (new, 1, 1)
    t = (phases + taps) * cutoff  # (new, 1, K): distance in units of the cutoff period
    t = t.clamp(-ZERO_CROSSINGS, ZERO_CROSSINGS)
    hann = torch.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.tensor(1.0, dtype=dtype, device=device), t.sin() / t)
    return sinc * (hann * (cutoff / orig)), width


def resampled_length(length: int, orig_freq: int, new_freq: int) -> int:
    """Output length for `length` input samples: ceil(length * new / orig), with the ratio rounded
    to float32 first as torchaudio does (this drops the last sample of some long inputs)."""
    g = math.gcd(orig_freq, new_freq)
    return math.ceil(np.float32(new_freq // g * length / (orig_freq // g)))


def resample(wave: torch.Tensor, orig_freq: int, new_freq: int) -> torch.Tensor:
    """Resample `wave` (..., n) from orig_freq to new_freq Hz (integers); floating point only."""
    if not wave.is_floating_point():
        raise TypeError(f"resample needs a floating point waveform, got {wave.dtype}")
    if orig_freq <= 0 or new_freq <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_freq} -> {new_freq}")
    if orig_freq == new_freq:
        return wave
    g = math.gcd(orig_freq, new_freq)
    orig, new = orig_freq // g, new_freq // g
    bank, width = sinc_filter_bank(orig, new, wave.dtype, wave.device)
    batch_shape, n = wave.shape[:-1], wave.shape[-1]
    x = F.pad(wave.reshape(-1, 1, n), (width, width + orig))  # (B, 1, n + 2*width + orig)
    y = F.conv1d(x, bank, stride=orig)  # (B, new, frames): one row per output phase
    y = y.transpose(1, 2).reshape(*batch_shape, -1)  # interleave phases: (..., new * frames)
    return y[..., : resampled_length(n, orig_freq, new_freq)]
