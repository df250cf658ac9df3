"""Silence detection and removal with pydub's exact semantics, in NumPy (no pydub at run time).

Upstream OmniVoice cleans reference clips and generated audio with pydub. pydub works on 16-bit
PCM with a millisecond grid: a slice [a, b) ms covers samples [a*spm, b*spm) (spm = samples per
ms), a segment's length in ms is rounded, a slice running past the last sample is zero-padded
to whole milliseconds, and a window's loudness is audioop's integer RMS (floor of sqrt(mean x^2))
compared with a dBFS threshold. Reproducing those details is what makes our cuts land on the
same samples as upstream's.
"""
from __future__ import annotations

import math

import numpy as np

from .pcm import PYDUB_FULL_SCALE, from_pcm16_pydub, to_pcm16_pydub


class Pcm16:
    """A mono 16-bit clip addressed in milliseconds, sliced and measured the way pydub does."""

    def __init__(self, samples: np.ndarray, sample_rate: int):
        if sample_rate % 1000:
            raise ValueError(f"the millisecond grid needs a rate divisible by 1000, got {sample_rate}")
        self.samples = np.asarray(samples, dtype=np.int16)
        self.sample_rate = sample_rate
        self.spm = sample_rate // 1000
        self._prefix_energy: np.ndarray | None = None

    @property
    def _energy(self) -> np.ndarray:
        """int64 prefix sums of squares (made on first use): any window's energy in O(1), exactly."""
        if self._prefix_energy is None:
            squares = self.samples.astype(np.int64) ** 2
            self._prefix_energy = np.concatenate([[0], np.cumsum(squares)])
        return self._prefix_energy

    def __len__(self) -> int:
        """Length in ms, rounded (half to even) as pydub rounds it."""
        return round(1000 * (float(len(self.samples)) / self.sample_rate))

    def _bounds(self, start_ms, end_ms):
        """Sample range and padded length of the slice [start_ms, end_ms), vectorised."""
        n_ms = len(self)
        first = np.minimum(start_ms, n_ms) * self.spm
        last = np.minimum(end_ms, n_ms) * self.spm
        have_first = np.minimum(first, len(self.samples))
        have_last = np.minimum(last, len(self.samples))
        # a slice that ends past the data is zero-padded, unless it holds no data at all
        length = np.where(have_last > have_first, last - first, 0)
        return have_first, have_last, length

    def slice(self, start_ms: int, end_ms: int | None = None) -> np.ndarray:
        """Samples of [start_ms, end_ms) (end defaults to the end), zero-padded like pydub."""
        first, last, length = self._bounds(start_ms, len(self) if end_ms is None else end_ms)
        data = self.samples[int(first):int(last)]
        return np.concatenate([data, np.zeros(int(length) - len(data), np.int16)])

    def window_rms(self, starts_ms: np.ndarray, length_ms: int) -> np.ndarray:
        """audioop's integer RMS of each slice [s, s + length_ms)."""
        first, last, length = self._bounds(starts_ms, starts_ms + length_ms)
        energy = (self._energy[last] - self._energy[first]).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            rms = np.floor(np.sqrt(energy / length))
        return np.where(length > 0, rms, 0).astype(np.int64)


def _silent_rms_limit(threshold_dbfs: float) -> int:
    """Largest integer RMS that pydub's `rms <= db_to_float(threshold) * 32768` calls silent."""
    return math.floor(10 ** (threshold_dbfs / 20) * PYDUB_FULL_SCALE)


def _loud_rms_floor(threshold_dbfs: float) -> int:
    """Smallest integer RMS whose pydub dBFS (20 log10(rms / 32768)) is not below the threshold."""
    rms = max(1, math.floor(10 ** (threshold_dbfs / 20) * PYDUB_FULL_SCALE) - 1)
    while 20 * math.log(rms / PYDUB_FULL_SCALE, 10) < threshold_dbfs:
        rms += 1
    return rms


def detect_silence(clip: Pcm16, min_silence_ms: int, threshold_dbfs: float, seek_ms: int) -> list[list[int]]:
    """[start, end] ms of silent stretches: windows of min_silence_ms every seek_ms whose RMS is
    at or below the threshold, merged the way pydub merges them."""
    n_ms = len(clip)
    if n_ms < min_silence_ms:
        return []
    last_start = n_ms - min_silence_ms
    starts = list(range(0, last_start + 1, seek_ms))
    if last_start % seek_ms:
        starts.append(last_start)
    starts = np.array(starts)
    rms = clip.window_rms(starts, min_silence_ms)
    silent_starts = starts[rms <= _silent_rms_limit(threshold_dbfs)].tolist()
    if not silent_starts:
        return []
    ranges = []
    range_start = prev = silent_starts[0]
    for start in silent_starts[1:]:
        # pydub only splits where windows are neither consecutive nor overlapping
        if start != prev + seek_ms and start > prev + min_silence_ms:
            ranges.append([range_start, prev + min_silence_ms])
            range_start = start
        prev = start
    ranges.append([range_start, prev + min_silence_ms])
    return ranges


def detect_nonsilent(clip: Pcm16, min_silence_ms: int, threshold_dbfs: float, seek_ms: int) -> list[list[int]]:
    """[start, end] ms of the stretches between silences (pydub's detect_nonsilent)."""
    silences = detect_silence(clip, min_silence_ms, threshold_dbfs, seek_ms)
    n_ms = len(clip)
    if not silences:
        return [[0, n_ms]]
    if silences[0] == [0, n_ms]:
        return []
    ranges, prev_end = [], 0
    for start, end in silences:
        ranges.append([prev_end, start])
        prev_end = end
    if prev_end != n_ms:
        ranges.append([prev_end, n_ms])
    if ranges[0] == [0, 0]:
        ranges.pop(0)
    return ranges


_PROBE_MS = 1000  # edges are measured on the first second first: output edges are short


def _first_loud_chunk(clip: Pcm16, threshold_dbfs: float, chunk_ms: int) -> int | None:
    starts = np.arange(0, len(clip), chunk_ms)
    loud = clip.window_rms(starts, chunk_ms) >= _loud_rms_floor(threshold_dbfs)
    return int(starts[loud.argmax()]) if loud.any() else None


def leading_silence_ms(clip: Pcm16, threshold_dbfs: float, chunk_ms: int = 10) -> int:
    """Where the first chunk at or above the threshold starts (pydub's detect_leading_silence)."""
    if len(clip) > 2 * _PROBE_MS:
        # chunks wholly inside the first second hold the same samples in the head as in the clip
        head = Pcm16(clip.samples[:_PROBE_MS * clip.spm], clip.sample_rate)
        found = _first_loud_chunk(head, threshold_dbfs, chunk_ms)
        if found is not None and found + chunk_ms <= _PROBE_MS:
            return found
    found = _first_loud_chunk(clip, threshold_dbfs, chunk_ms)
    return len(clip) if found is None else found


def remove_silence(wave: np.ndarray, sample_rate: int, mid_ms: int, lead_ms: int, trail_ms: int,
                   threshold_dbfs: float = -50.0) -> np.ndarray:
    """Shorten inner silences longer than mid_ms to mid_ms (kept as mid_ms on each side of the
    speech, shared when they meet) and keep at most lead_ms / trail_ms at the edges.

    The result went through 16-bit PCM, as upstream's does. `wave` is float32 (n,).
    """
    pcm = to_pcm16_pydub(wave)
    if mid_ms > 0:
        clip = Pcm16(pcm, sample_rate)
        ranges = [[start - mid_ms, end + mid_ms]
                  for start, end in detect_nonsilent(clip, mid_ms, threshold_dbfs, seek_ms=10)]
        for left, right in zip(ranges, ranges[1:]):
            if right[0] < left[1]:  # kept silences overlap: meet halfway
                left[1] = right[0] = (left[1] + right[0]) // 2
        n_ms = len(clip)
        pieces = [clip.slice(max(start, 0), min(end, n_ms)) for start, end in ranges]
        pcm = np.concatenate(pieces) if pieces else np.zeros(0, np.int16)
    pcm = _trim_edges(pcm, sample_rate, lead_ms, trail_ms, threshold_dbfs)
    return from_pcm16_pydub(pcm)


def _trim_edges(pcm: np.ndarray, sample_rate: int, lead_ms: int, trail_ms: int, threshold_dbfs: float) -> np.ndarray:
    clip = Pcm16(pcm, sample_rate)
    cut = max(0, leading_silence_ms(clip, threshold_dbfs) - lead_ms)
    reversed_clip = Pcm16(clip.slice(cut)[::-1], sample_rate)
    cut = max(0, leading_silence_ms(reversed_clip, threshold_dbfs) - trail_ms)
    return reversed_clip.slice(cut)[::-1]


def trim_long(wave: np.ndarray, sample_rate: int, max_s: float = 15.0, min_s: float = 3.0,
              threshold_s: float = 20.0) -> np.ndarray:
    """Clips longer than threshold_s are cut at the start of the last speech stretch that begins
    between min_s and max_s (at max_s if there is none), like upstream's trim_long_audio."""
    if len(wave) / sample_rate <= threshold_s:
        return wave
    clip = Pcm16(to_pcm16_pydub(wave), sample_rate)
    speech = detect_nonsilent(clip, min_silence_ms=100, threshold_dbfs=-40, seek_ms=10)
    if not speech:
        return wave
    max_ms, min_ms = int(max_s * 1000), int(min_s * 1000)
    cut = 0
    for start, end in speech:
        if cut < start <= max_ms:
            cut = start
        if end > max_ms:
            break
    if cut < min_ms:
        cut = min(max_ms, len(clip))
    return from_pcm16_pydub(clip.slice(0, cut))
