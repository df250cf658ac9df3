"""Audio in and out of the engine: read a reference clip, prepare it like upstream OmniVoice, and
finish generated audio (silence, loudness, fades), plus quick diagnostics of a clip for the UI.

Every waveform here is a float32 NumPy array (n,), mono. Operations, constants and their order
follow upstream omnivoice 0.2.1 (`create_voice_clone_prompt`, `_post_process_audio`,
`utils/audio.py`) so results match it sample for sample.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from engine.audio import silence
from engine.errors import AudioInputError
from engine.audio.resample import resample

SAMPLE_RATE = 24000  # the codec's rate: everything below works at it
MIN_RATE, MAX_RATE = 8000, 96000  # source rates we accept
MIN_SECONDS = 1.0
DEFAULT_MAX_SECONDS = 60.0  # read at most this much of a clip (the reference is cut to <= 15 s anyway)
RECOMMENDED_SECONDS = (3.0, 10.0)
SILENT_PEAK = 10 ** (-60 / 20)  # a clip whose loudest sample is below -60 dBFS is taken as silent
TARGET_RMS = 0.1  # upstream raises quiet references to this RMS and scales the output back
_RESAMPLE_CONTEXT_S = 0.01  # extra input read past the cut so the last kept samples are exact
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_SUPPORTED = "WAV, FLAC, OGG (Vorbis/Opus), MP3, AIFF"


@dataclass(frozen=True)
class Clip:
    """A decoded clip: mono float32 at 24 kHz, at most `max_seconds` of the source."""

    samples: np.ndarray  # (n,) float32
    source_rate: int
    source_seconds: float  # length of the whole source, also when only its start was read
    truncated: bool  # True when only the first max_seconds were read

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def load_clip(source: str | os.PathLike | tuple, max_seconds: float | None = DEFAULT_MAX_SECONDS) -> Clip:
    """Decode a reference clip to mono 24 kHz.

    Parameters
    ----------
    source : path, or (waveform, sample_rate)
        A file libsndfile reads (WAV, FLAC, OGG/Opus, MP3, ...; any bit depth; 8-96 kHz; channels
        are averaged), or an array / tensor shaped (n,) or (channels, n): float in [-1, 1], or
        int16 / int32 PCM.
    max_seconds : float or None
        Read at most this many seconds (None: all). Up to this length the result equals upstream's
        exactly; past it, RMS and trimming only see the first max_seconds.

    Raises
    ------
    AudioInputError
        For URLs, missing, empty, unreadable, silent or too short clips, with a message for the user.
    """
    if isinstance(source, tuple):
        if len(source) != 2 or isinstance(source[0], (int, np.integer)):
            raise AudioInputError("Pass audio as (waveform, sample_rate); Gradio's numpy audio is "
                                  "(sample_rate, waveform) with samples first, so swap and transpose it.")
        data, rate, source_frames = _from_array(*source, max_seconds)
    else:
        data, rate, source_frames = _from_file(source, max_seconds)
    if data.shape[-1] == 0:
        raise AudioInputError("The clip contains no audio (0 samples).")
    if not np.isfinite(data).all():
        raise AudioInputError("The clip contains invalid samples (NaN or infinity); export it again as WAV.")
    mono = data.mean(axis=0) if data.shape[0] > 1 else data[0]  # (channels, n) -> (n,)
    wave = resample(torch.from_numpy(np.ascontiguousarray(mono)), rate, SAMPLE_RATE).numpy()
    truncated = max_seconds is not None and data.shape[-1] > math.ceil(max_seconds * rate)
    if truncated:
        wave = wave[: int(max_seconds * SAMPLE_RATE)]
    clip = Clip(wave, rate, source_frames / rate, truncated)
    _check_usable(clip)
    return clip


def _from_file(source: str | os.PathLike, max_seconds: float | None) -> tuple[np.ndarray, int, int]:
    """(channels, n) float32 of the first max_seconds (+ resampling context), rate, total frames."""
    text = os.fspath(source)
    if _URL.match(text):
        raise AudioInputError(f"{text} is a web address. Download the audio file first, then choose "
                              f"the file on this computer.")
    path = Path(text).expanduser()
    if not path.exists():
        raise AudioInputError(f"The audio file {path} does not exist.")
    if path.is_dir():
        raise AudioInputError(f"{path} is a folder, not an audio file.")
    if path.stat().st_size == 0:
        raise AudioInputError(f"The audio file {path} is empty (0 bytes).")
    try:
        with sf.SoundFile(path) as f:
            rate, frames = f.samplerate, f.frames
            _check_rate(rate)
            limit = _frames_to_read(max_seconds, rate)
            data = f.read(-1 if limit is None else limit, dtype="float32", always_2d=True)  # (n, C)
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise AudioInputError(f"{path.name} could not be read as audio ({err}). The file is damaged or "
                              f"in a format we cannot decode; supported: {_SUPPORTED}.") from None
    return data.T, rate, max(frames, len(data))


def _from_array(wave, rate, max_seconds: float | None) -> tuple[np.ndarray, int, int]:
    if isinstance(wave, torch.Tensor):
        wave = wave.detach().cpu().numpy()
    wave = np.asarray(wave)
    if wave.ndim == 1:
        wave = wave[None]
    if wave.ndim != 2 or wave.shape[0] > 16:
        raise AudioInputError(f"An audio array must be shaped (samples,) or (channels, samples); got "
                              f"{wave.shape}.")
    rate = int(rate)
    _check_rate(rate)
    frames = wave.shape[-1]
    wave = wave[:, : _frames_to_read(max_seconds, rate)]  # None: all
    if wave.dtype == np.int16:
        wave = wave / np.float32(32768)
    elif wave.dtype == np.int32:
        wave = wave / np.float32(2**31)
    elif not np.issubdtype(wave.dtype, np.floating):
        raise AudioInputError(f"Audio samples must be float, int16 or int32, not {wave.dtype}.")
    return wave.astype(np.float32), rate, frames


def _frames_to_read(max_seconds: float | None, rate: int) -> int | None:
    """Source frames covering max_seconds plus resampling context (None: all of them)."""
    if max_seconds is None:
        return None
    return math.ceil(max_seconds * rate) + math.ceil(_RESAMPLE_CONTEXT_S * rate)


def _check_rate(rate: int) -> None:
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioInputError(f"The clip's sample rate is {rate} Hz; use a recording between "
                              f"{MIN_RATE // 1000} and {MAX_RATE // 1000} kHz.")


def _check_usable(clip: Clip) -> None:
    if clip.source_seconds < MIN_SECONDS:
        raise AudioInputError(f"The clip is only {clip.source_seconds:.1f} s long. Use at least "
                              f"{MIN_SECONDS:.0f} s of speech ({RECOMMENDED_SECONDS[0]:.0f}-"
                              f"{RECOMMENDED_SECONDS[1]:.0f} s works best).")
    if np.abs(clip.samples).max() < SILENT_PEAK:
        raise AudioInputError("The clip is silent. Check that the microphone is connected and not "
                              "muted, then record again.")


# ---------------------------------------------------------------------------------------------
# Reference preparation (upstream create_voice_clone_prompt, audio part)


@dataclass(frozen=True)
class Reference:
    samples: np.ndarray  # (n,) float32, 24 kHz, ready for the codec (not yet cut to whole frames)
    rms: float  # RMS of the clip as loaded: the output is scaled back to it when it is < 0.1


def prepare_reference(samples: np.ndarray, preprocess: bool = True, trim_long: bool = True) -> Reference:
    """Raise a quiet clip to RMS 0.1; then, if `preprocess`, cut clips > 20 s at a pause to <= 15 s
    (only with `trim_long`: upstream skips it when the user gave a transcript, which must match
    the audio) and shorten pauses (inner to 200 ms, 100 ms lead, 200 ms tail)."""
    rms = float(np.sqrt(np.mean(samples**2)))
    if 0 < rms < TARGET_RMS:
        samples = samples * TARGET_RMS / rms
    if preprocess:
        if trim_long:
            samples = silence.trim_long(samples, SAMPLE_RATE)
        samples = silence.remove_silence(samples, SAMPLE_RATE, mid_ms=200, lead_ms=100, trail_ms=200)
        if len(samples) == 0:
            raise AudioInputError("No speech was found in the clip: everything in it is quieter than "
                                  "-50 dBFS. Record closer to the microphone.")
    return Reference(samples, rms)


# ---------------------------------------------------------------------------------------------
# Output finishing (upstream _post_process_audio and cross_fade_chunks)


def finish_output(audio: np.ndarray, ref_rms: float | None, remove_pauses: bool = True,
                  pad_s: float = 0.1, fade_s: float = 0.1) -> np.ndarray:
    """Shorten pauses over 500 ms (and edges to 100 ms), restore the reference's loudness (or
    peak-normalise to 0.5 without a reference), then fade in/out and pad with silence."""
    if remove_pauses:
        audio = silence.remove_silence(audio, SAMPLE_RATE, mid_ms=500, lead_ms=100, trail_ms=100)
    if ref_rms is not None and ref_rms < TARGET_RMS:
        audio = audio * ref_rms / TARGET_RMS
    elif ref_rms is None and len(audio):
        peak = np.abs(audio).max()
        if peak > 1e-6:
            audio = audio / peak * 0.5
    return fade_and_pad(audio, pad_s, fade_s)


def fade_and_pad(audio: np.ndarray, pad_s: float = 0.1, fade_s: float = 0.1) -> np.ndarray:
    """Linear fade-in/out over fade_s (at most half the clip each) and pad_s of zeros on both sides."""
    if len(audio) == 0:
        return audio
    out = audio.copy()
    k = min(int(fade_s * SAMPLE_RATE), len(out) // 2)
    if k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    pad = np.zeros(int(pad_s * SAMPLE_RATE), dtype=out.dtype)
    return np.concatenate([pad, out, pad])


def cross_fade_chunks(chunks: list[np.ndarray], gap_s: float = 0.3) -> np.ndarray:
    """Join chunks: each seam fades out over gap_s/3, has gap_s/3 of silence, fades in over gap_s/3."""
    if len(chunks) == 1:
        return chunks[0]
    third = int(gap_s * SAMPLE_RATE) // 3
    merged = chunks[0].copy()
    for chunk in chunks[1:]:
        k = min(third, len(merged))
        if k > 0:
            merged[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
        head = chunk.copy()
        k = min(third, len(head))
        if k > 0:
            head[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        merged = np.concatenate([merged, np.zeros(third, np.float32), head])
    return merged


# ---------------------------------------------------------------------------------------------
# Diagnostics for the UI


@dataclass(frozen=True)
class ClipReport:
    seconds: float
    peak: float  # largest |sample|, 1.0 = full scale
    clipped_fraction: float  # share of samples at (or past) full scale
    silence_fraction: float  # share of 20 ms frames more than 40 dB below the loudest frame
    snr_db: float  # rough: loud frames (95th percentile) over the noise floor (5th: pauses)
    hints: list[str] = field(default_factory=list)


def inspect_clip(clip: Clip) -> ClipReport:
    """Measure a loaded clip and say, in words, what would make it a better reference."""
    x = clip.samples
    frame = SAMPLE_RATE // 50
    frames = x[: len(x) // frame * frame].reshape(-1, frame)
    frame_rms = np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)) if len(frames) else np.zeros(1)
    loudest = frame_rms.max()
    peak = float(np.abs(x).max())
    clipped = float(np.mean(np.abs(x) >= 0.99))
    quiet = float(np.mean(frame_rms < loudest * 10 ** (-40 / 20))) if loudest > 0 else 1.0
    noise, speech = np.percentile(frame_rms, 5), np.percentile(frame_rms, 95)
    snr = float(20 * np.log10(speech / noise)) if noise > 0 else 99.0

    hints = []
    low, high = RECOMMENDED_SECONDS
    if clip.truncated:
        hints.append(f"Only the first {clip.seconds:.0f} s of this {clip.source_seconds:.0f} s recording "
                     f"are used.")
    if clip.source_seconds < low:
        hints.append(f"Short clip ({clip.source_seconds:.1f} s): {low:.0f}-{high:.0f} s of speech clones "
                     f"the voice better.")
    elif clip.source_seconds > 20:
        hints.append("Long clip: without a transcript it is cut at a pause to at most 15 s; "
                     f"{low:.0f}-{high:.0f} s is recommended.")
    elif clip.source_seconds > high:
        hints.append(f"Clips over {high:.0f} s make generation slower; {low:.0f}-{high:.0f} s is "
                     f"recommended.")
    if clipped > 0.001:
        hints.append("The recording is clipped (distorted at full volume): lower the input gain and "
                     "record again.")
    if peak < 0.05:
        hints.append("The recording is very quiet: move closer to the microphone.")
    if quiet > 0.5:
        hints.append("More than half of the clip is silence.")
    if snr < 15:
        hints.append("There is a lot of background noise: record in a quieter room.")
    if clip.source_rate < 16000:
        hints.append(f"Low sample rate ({clip.source_rate / 1000:g} kHz, telephone quality): the cloned "
                     f"voice will sound muffled.")
    return ClipReport(clip.seconds, peak, clipped, quiet, snr, hints)
