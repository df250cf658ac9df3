"""Reading a clip: any supported file or (samples, rate) array to mono float32 at 24 kHz, checked
for what makes it unusable as a reference (too short, silent, unsupported)."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from engine.audio.ffmpeg_read import decode_with_ffmpeg, ffmpeg_available
from engine.audio.resample import resample
from engine.constants import SAMPLE_RATE
from engine.errors import AudioInputError

MIN_RATE, MAX_RATE = 8000, 96000  # source rates we accept
MIN_SECONDS = 1.0
RECOMMENDED_SECONDS = (3.0, 10.0)
DEFAULT_MAX_SECONDS = 60.0  # read at most this much of a clip (the reference is cut to <= 15 s anyway)
SILENT_DBFS = -60  # a clip whose loudest sample is below this is too quiet to use
SILENT_PEAK = 10 ** (SILENT_DBFS / 20)
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

    @property
    def cut_note(self) -> str | None:
        """What the user must be told when only the start of the source was read (None otherwise)."""
        if not self.truncated:
            return None
        return (f"Only the first {self.seconds:.0f} s of this {self.source_seconds:.0f} s recording are used "
                f"(a longer reference makes generation slow and memory-hungry; 3-10 s works best).")


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
        raise AudioInputError(f"The audio file {path.name} is empty (0 bytes).")
    try:
        with sf.SoundFile(path) as f:
            rate, frames = f.samplerate, f.frames
            _check_rate(rate)
            limit = _frames_to_read(max_seconds, rate)
            data = f.read(-1 if limit is None else limit, dtype="float32", always_2d=True)  # (n, C)
        return data.T, rate, max(frames, len(data))
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        reason = str(err).replace(str(path), path.name)  # the folder may be the app's private upload cache
    decoded = decode_with_ffmpeg(path, max_seconds)  # M4A, WebM and the rest of what ffmpeg reads
    if decoded is None:
        more = "anything ffmpeg decodes (M4A, WebM, ...)" if ffmpeg_available() else (
            "M4A, WebM and more once ffmpeg is installed")
        raise AudioInputError(f"{path.name} could not be read as audio ({reason}). The file is damaged or "
                              f"in a format we cannot decode; supported: {_SUPPORTED}, {more}.")
    data, rate = decoded
    _check_rate(rate)
    return data[:, : _frames_to_read(max_seconds, rate)], rate, data.shape[-1]


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
    peak = float(np.abs(clip.samples).max())
    if peak == 0:
        raise AudioInputError("The clip is silent (every sample is zero). Check that the microphone is connected "
                              "and not muted, then record again.")
    if peak < SILENT_PEAK:
        level = 20 * np.log10(peak)
        raise AudioInputError(f"The clip is too quiet: its loudest moment is {level:.0f} dBFS, "
                              f"{SILENT_DBFS - level:.0f} dB below the {SILENT_DBFS} dBFS a reference needs. "
                              "Record closer to the microphone or raise its input level.")
