"""Synthetic sounds whose properties are known by construction (shared by the engine, tools and app tests)."""
import numpy as np

RATE = 24000


def buzz(seconds: float, f0: float = 140.0, rate: int = RATE) -> np.ndarray:
    """Speech-like: a voiced buzz (7 harmonics) with a 4 Hz syllable envelope that never goes silent."""
    t = np.arange(int(seconds * rate)) / rate
    wave = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    return (0.25 * wave / np.abs(wave).max() * (0.55 + 0.45 * np.sin(2 * np.pi * 4 * t))).astype(np.float32)


def sweep(seconds: float, amplitude: float = 0.5, rate: int = RATE) -> np.ndarray:
    """A linear sine sweep from 100 Hz to 4 kHz."""
    t = np.arange(int(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * (100 * t + (4000 - 100) / (2 * seconds) * t ** 2))).astype(np.float32)


def silence(seconds: float, rate: int = RATE) -> np.ndarray:
    return np.zeros(int(seconds * rate), np.float32)
