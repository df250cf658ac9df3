"""Signal checks of a finished take, NumPy only: clipping, long pauses, sudden dropouts.

Levels are measured on 10 ms windows every 5 ms and compared with the take's own loud level
(95th percentile of the windows), so a quiet voice and a loud one are judged alike. A window more
than QUIET_DB below that level is silent. An inner silent stretch is a pause; one that is short
(at most DROPOUT_MAX_MS) and cut in and out of sound that is still loud on both sides (within
DROPOUT_EDGE_DB of the loud level, 5 ms away) is a dropout: speech fades into its own pauses,
a broken take drops out."""
from __future__ import annotations

import numpy as np

from engine.audio.pcm import to_pcm16_pydub
from engine.audio.silence import Pcm16
from engine.checks.verdict import Check, Thresholds

WINDOW_MS, HOP_MS = 10, 5
CLIP_LEVEL = 0.999  # |x| at or above this is full scale (int16 32735 and up)
QUIET_DB = 40.0
SILENT_TAKE_DBFS = -60.0  # a take whose loud level is below this has no sound at all
DROPOUT_MAX_MS = 250
DROPOUT_EDGE_DB = 20.0


def window_levels(wave: np.ndarray, sample_rate: int) -> np.ndarray:
    """dBFS of the 10 ms windows starting every 5 ms (digital silence: -120)."""
    clip = Pcm16(to_pcm16_pydub(wave), sample_rate)
    starts = np.arange(0, max(len(clip) - WINDOW_MS, 0) + 1, HOP_MS)
    rms = clip.window_rms(starts, WINDOW_MS).astype(np.float64)
    return 20 * np.log10(np.maximum(rms, 1e-6 * 32768) / 32768)


def _silent_runs(silent: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) window indices of each run of True."""
    edges = np.diff(np.concatenate([[0], silent.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def check_clipping(wave: np.ndarray, max_fraction: float) -> Check:
    fraction = float(np.mean(np.abs(wave) >= CLIP_LEVEL)) if len(wave) else 0.0
    detail = f"{fraction:.2%} of the samples are at full scale" if fraction > max_fraction else ""
    return Check("clipping", fraction, max_fraction, fraction <= max_fraction, detail)


def check_gaps(wave: np.ndarray, sample_rate: int, thresholds: Thresholds) -> list[Check]:
    """The pauses check (longest inner silence, seconds) and the dropouts check (how many)."""
    levels = window_levels(wave, sample_rate)
    loud = float(np.percentile(levels, 95)) if len(levels) else -120.0
    if loud < SILENT_TAKE_DBFS:
        seconds = len(wave) / sample_rate
        return [Check("pauses", seconds, thresholds.max_pause_s, False, "the take is silent"),
                Check("dropouts", 0, thresholds.max_dropouts, True)]
    silent = levels < loud - QUIET_DB
    inner = [(a, b) for a, b in _silent_runs(silent) if a > 0 and b < len(levels)]  # not the edges
    longest, where, dropouts = 0.0, 0.0, []
    for a, b in inner:
        ms = (b - a - 1) * HOP_MS + WINDOW_MS  # the windows' span; true gaps are this long at least
        if ms / 1000 > longest:
            longest, where = ms / 1000, a * HOP_MS / 1000
        if ms <= DROPOUT_MAX_MS and min(levels[a - 1], levels[b]) >= loud - DROPOUT_EDGE_DB:
            dropouts.append(a * HOP_MS / 1000)
    pause_ok = longest <= thresholds.max_pause_s
    drop_ok = len(dropouts) <= thresholds.max_dropouts
    return [Check("pauses", longest, thresholds.max_pause_s, pause_ok,
                  "" if pause_ok else f"{longest:.1f} s of silence at {where:.1f} s"),
            Check("dropouts", len(dropouts), thresholds.max_dropouts, drop_ok,
                  "" if drop_ok else "sound cuts out at " + ", ".join(f"{t:.2f} s" for t in dropouts[:3]))]


def check_signal(wave: np.ndarray, sample_rate: int, thresholds: Thresholds) -> list[Check]:
    """Clipping, pauses and dropouts of a mono float take."""
    return [check_clipping(wave, thresholds.max_clipped), *check_gaps(wave, sample_rate, thresholds)]
