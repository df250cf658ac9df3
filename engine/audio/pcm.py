"""16-bit PCM, one home for both conversions from float samples in [-1, 1]:

- `to_int16`: what VoiceDesk plays, streams and stores (rounded to nearest, peak 32767, so +1.0 and -1.0 are
  symmetric and a round trip changes a sample by at most half a step);
- `to_pcm16_pydub` / `from_pcm16_pydub`: upstream's conversion (scaled by pydub's 32768 and truncated toward
  zero), used only where our silence cuts must land on the same samples as upstream's.
"""
from __future__ import annotations

import numpy as np

PYDUB_FULL_SCALE = 32768.0  # pydub's max_possible_amplitude for 16-bit audio


def to_int16(audio: np.ndarray) -> np.ndarray:
    """float [-1, 1] -> int16, rounded (Gradio would normalise float chunks by their own peak, which makes
    loudness jump: the app sends and keeps int16)."""
    return np.round(np.clip(np.asarray(audio, np.float32), -1.0, 1.0) * 32767).astype(np.int16)


def to_pcm16_pydub(wave: np.ndarray) -> np.ndarray:
    """float32 [-1, 1] -> int16, truncating toward zero like upstream's conversion."""
    return (wave.astype(np.float32) * PYDUB_FULL_SCALE).clip(-32768, 32767).astype(np.int16)


def from_pcm16_pydub(pcm: np.ndarray) -> np.ndarray:
    return pcm.astype(np.float32) / PYDUB_FULL_SCALE
