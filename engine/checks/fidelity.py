"""How far apart two renders of one request are: the share of equal audio tokens and the distance of their
log-mel spectrograms. Used by the Realtime check (engine/checks/realtime.py) and the benchmarks."""
from __future__ import annotations

import math

import numpy as np
import torch


def token_agreement(tokens: torch.Tensor, reference: torch.Tensor) -> float:
    """Fraction of (codebook, frame) slots with the same token; shapes must match."""
    if tokens.shape != reference.shape:
        raise ValueError(f"token shapes differ: {tuple(tokens.shape)} vs {tuple(reference.shape)}")
    return (tokens.cpu() == reference.cpu()).float().mean().item()


def mel_filterbank(sr: int, n_fft: int, n_mels: int) -> torch.Tensor:
    """Triangular HTK-mel filters [n_mels, n_fft // 2 + 1]."""
    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2, dtype=torch.float64)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    bins = torch.linspace(0, sr / 2, n_fft // 2 + 1, dtype=torch.float64)
    lo, mid, hi = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    up = (bins - lo) / (mid - lo)
    down = (hi - bins) / (hi - mid)
    return torch.clamp(torch.minimum(up, down), min=0.0).float()


def log_mel(audio: np.ndarray, sr: int, n_fft: int = 1024, hop: int = 256, n_mels: int = 80) -> torch.Tensor:
    x = torch.from_numpy(np.asarray(audio, dtype=np.float32))
    spec = torch.stft(x, n_fft, hop, window=torch.hann_window(n_fft), return_complex=True).abs() ** 2
    mel = mel_filterbank(sr, n_fft, n_mels) @ spec  # [n_mels, frames]
    return 10.0 * torch.log10(mel.clamp(min=1e-10))


def mel_distance_db(audio: np.ndarray, reference: np.ndarray, sr: int) -> float:
    """Mean absolute log-mel difference in dB over the common length (0 = identical)."""
    n = min(len(audio), len(reference))
    if n < 1024:
        raise ValueError("clips too short for a mel comparison")
    return (log_mel(audio[:n], sr) - log_mel(reference[:n], sr)).abs().mean().item()
