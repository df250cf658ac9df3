"""Audio file formats for what leaves the app, the one place audio is encoded: the API's responses
(mp3 / opus / aac / flac / wav / pcm, chunk by chunk) and the Studio's exports (WAV, FLAC, MP3 and M4B
with chapter marks). The page's live sound is raw PCM (app/live.py).

`open_encoder` picks the encoder: 16-bit PCM, bare or in WAV, is written with numpy alone
(app/pcm_writer.py); everything else through FFmpeg's own libraries (PyAV, app/encoder_av.py), which
is imported only then, so that an app serving `pcm` and `wav` runs without PyAV installed (a headless
GPU server, for instance). Asked for a format that needs it where it is missing, `open_encoder`
says so (EncodeError).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from engine.errors import VoiceDeskError
from engine.fileio import atomic_write


@dataclass(frozen=True)
class AudioFormat:
    name: str  # what a user asks for: the API's response_format, an export's suffix
    muxer: str
    codec: str
    content_type: str
    bit_rate: int | None = None
    options: dict[str, str] = field(default_factory=dict)  # the muxer's

    @property
    def needs_pyav(self) -> bool:
        return self.codec != "pcm_s16le"


FORMATS: dict[str, AudioFormat] = {  # the API's response_format -> format
    "mp3": AudioFormat("mp3", "mp3", "libmp3lame", "audio/mpeg", 64_000),
    "opus": AudioFormat("opus", "ogg", "libopus", "audio/ogg", 48_000, {"page_duration": "20000"}),  # µs per page
    "aac": AudioFormat("aac", "adts", "aac", "audio/aac", 64_000),
    "flac": AudioFormat("flac", "flac", "flac", "audio/flac"),
    "wav": AudioFormat("wav", "wav", "pcm_s16le", "audio/wav"),
    "pcm": AudioFormat("pcm", "s16le", "pcm_s16le", "audio/pcm"),  # raw samples, little-endian, no header
}
_BOOK = {"movflags": "+faststart"}  # the index first, so players can seek before the whole file is read
FILE_FORMATS: dict[str, AudioFormat] = {  # an exported file's suffix -> format
    ".wav": FORMATS["wav"],
    ".flac": FORMATS["flac"],
    ".mp3": AudioFormat("mp3", "mp3", "libmp3lame", "audio/mpeg", 128_000),
    ".m4b": AudioFormat("m4b", "ipod", "aac", "audio/mp4", 96_000, _BOOK),
    ".m4a": AudioFormat("m4a", "ipod", "aac", "audio/mp4", 128_000, _BOOK),
}


class EncodeError(VoiceDeskError):
    """Audio that cannot be written as asked."""


@dataclass(frozen=True)
class ChapterMark:
    title: str
    start_s: float
    end_s: float


class AudioEncoder(Protocol):
    """Mono chunks (int16, or float32 in [-1, 1]) in, one stream of `format` out."""

    format: AudioFormat

    @property
    def content_type(self) -> str: ...

    def encode(self, pcm: np.ndarray) -> bytes:
        """Add samples [n]; returns the bytes made so far (b"" when writing to a file)."""

    def finish(self) -> bytes:
        """Flush and close the stream; returns the last bytes."""


def open_encoder(fmt: str | AudioFormat, sample_rate: int, file: str | Path | BinaryIO | None = None,
                 title: str | None = None, chapters: list[ChapterMark] = ()) -> AudioEncoder:
    """An encoder of `fmt` (a key of FORMATS, or a format). `file`: a path or a binary file to write to; None
    keeps the bytes in memory, and `encode` and `finish` return them as they are made (for streaming).
    `title` and `chapters` go in the container where it has room for them (title: WAV, MP3, MP4; chapters:
    MP3, MP4). Raises EncodeError when the format needs PyAV and it is not installed."""
    fmt = FORMATS[fmt] if isinstance(fmt, str) else fmt
    if not fmt.needs_pyav:
        from .pcm_writer import PcmWriter

        return PcmWriter(fmt, sample_rate, file, title=title)
    try:
        from .encoder_av import AvEncoder
    except ModuleNotFoundError as err:
        if err.name != "av":
            raise
        raise EncodeError(f"{fmt.name} needs PyAV (pip install av), which is not installed here: mp3, opus, aac, "
                          "flac, m4a and m4b are encoded through it; pcm and wav need nothing more.") from None
    return AvEncoder(fmt, sample_rate, file, title=title, chapters=chapters)


def write_file(audio: np.ndarray, sample_rate: int, path: str | Path, title: str | None = None,
               chapters: list[ChapterMark] = ()) -> Path:
    """Write mono `audio` (float32 in [-1, 1], or int16) to `path`, its format from the suffix (FILE_FORMATS),
    with chapter marks where the container has them (M4B, MP3). Written atomically."""
    path = Path(path)
    fmt = FILE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise EncodeError(f"Cannot write {path.name}: use one of {', '.join(FILE_FORMATS)}.")
    if len(audio) == 0:
        raise EncodeError("There is no audio to export.")

    def write(target: str) -> None:
        encoder = open_encoder(fmt, sample_rate, file=target, title=title, chapters=chapters)
        encoder.encode(audio)
        encoder.finish()

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, write)
    return path
