"""Audio file formats for what leaves the app, the one place audio is encoded: the API's responses
(mp3 / opus / aac / flac / wav / pcm, chunk by chunk) and the Studio's exports (WAV, FLAC, MP3 and M4B
with chapter marks), through FFmpeg's own libraries (PyAV). The page's live sound is raw PCM (app/live.py).

Streaming-safe: `encode` returns every complete frame of the chunk at once (Ogg pages are closed
every 20 ms instead of every second), so a client can play one sentence while the next is made;
only what the codec needs to finish a frame (under one frame, at most ~50 ms) waits for the next
chunk or `finish`. In memory the output cannot be rewound, so WAV and FLAC headers carry no length
(every decoder reads to the end); given a real file, the headers are completed at `finish`.

Why PyAV and not the ffmpeg command line (docs/api.md has the figures): the command line is 0.3-0.4 s
to start, and it holds back most of a chunk until more input arrives.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import av
import numpy as np

from engine.errors import VoiceDeskError
from engine.fileio import atomic_write


@dataclass(frozen=True)
class AudioFormat:
    muxer: str
    codec: str
    content_type: str
    bit_rate: int | None = None
    options: dict[str, str] = field(default_factory=dict)  # the muxer's


FORMATS: dict[str, AudioFormat] = {  # the API's response_format -> format
    "mp3": AudioFormat("mp3", "libmp3lame", "audio/mpeg", 64_000),
    "opus": AudioFormat("ogg", "libopus", "audio/ogg", 48_000, {"page_duration": "20000"}),  # µs per page
    "aac": AudioFormat("adts", "aac", "audio/aac", 64_000),
    "flac": AudioFormat("flac", "flac", "audio/flac"),
    "wav": AudioFormat("wav", "pcm_s16le", "audio/wav"),
    "pcm": AudioFormat("s16le", "pcm_s16le", "audio/pcm"),  # raw samples, little-endian, no header
}
_BOOK = {"movflags": "+faststart"}  # the index first, so players can seek before the whole file is read
FILE_FORMATS: dict[str, AudioFormat] = {  # an exported file's suffix -> format
    ".wav": FORMATS["wav"],
    ".flac": FORMATS["flac"],
    ".mp3": AudioFormat("mp3", "libmp3lame", "audio/mpeg", 128_000),
    ".m4b": AudioFormat("ipod", "aac", "audio/mp4", 96_000, _BOOK),
    ".m4a": AudioFormat("ipod", "aac", "audio/mp4", 128_000, _BOOK),
}
_SAMPLE_FORMATS = {np.dtype(np.int16): "s16", np.dtype(np.float32): "flt"}


class EncodeError(VoiceDeskError):
    """Audio that cannot be written as asked."""


@dataclass(frozen=True)
class ChapterMark:
    title: str
    start_s: float
    end_s: float


class _Buffer:
    """A write-only, non-seekable file that hands over what was written since it was last asked."""

    def __init__(self):
        self._data = bytearray()

    def write(self, data) -> int:
        self._data += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self._data)
        self._data.clear()
        return out


class AudioEncoder:
    """Encode mono chunks (int16, or float32 in [-1, 1]) into one stream of `fmt` (a key of FORMATS, or a
    format).

    `file`: a path or a binary file to write to; None keeps the bytes in memory, and `encode` and
    `finish` return them as they are made (for streaming). `title` and `chapters` go in the container
    where it has room for them (MP3, MP4)."""

    def __init__(self, fmt: str | AudioFormat, sample_rate: int, file: str | Path | BinaryIO | None = None,
                 title: str | None = None, chapters: list[ChapterMark] = ()):
        self.format = FORMATS[fmt] if isinstance(fmt, str) else fmt
        self.sample_rate = sample_rate
        self._buffer = _Buffer() if file is None else None
        target = self._buffer if file is None else (str(file) if isinstance(file, Path) else file)
        self._container = av.open(target, mode="w", format=self.format.muxer, options=dict(self.format.options))
        self._stream = self._container.add_stream(self.format.codec, rate=sample_rate, layout="mono")
        if self.format.bit_rate:
            self._stream.bit_rate = self.format.bit_rate
        if title:
            self._container.metadata["title"] = title
        if chapters:
            self._container.set_chapters([
                {"id": i + 1, "start": round(mark.start_s * 1000), "end": round(mark.end_s * 1000),
                 "time_base": Fraction(1, 1000), "metadata": {"title": mark.title}}
                for i, mark in enumerate(chapters)])
        self._samples = 0
        self.packets = 0  # codec frames written so far (for AAC each decodes to `frame_size` samples)

    @property
    def content_type(self) -> str:
        return self.format.content_type

    @property
    def frame_size(self) -> int:
        """Samples in one codec frame (AAC: 1024; 0 for PCM, which has no frames)."""
        return self._stream.codec_context.frame_size

    def encode(self, pcm: np.ndarray) -> bytes:
        """Add samples [n]; returns the bytes made so far (b"" when writing to a file)."""
        pcm = np.ascontiguousarray(pcm)
        if pcm.dtype not in _SAMPLE_FORMATS:
            pcm = pcm.astype(np.int16)
        if len(pcm):
            frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format=_SAMPLE_FORMATS[pcm.dtype], layout="mono")
            frame.sample_rate, frame.pts = self.sample_rate, self._samples
            self._samples += len(pcm)
            self._mux(frame)
        return self._take()

    def finish(self) -> bytes:
        """Flush the codec and close the stream; returns the last bytes."""
        self._mux(None)
        self._container.close()
        return self._take()

    def _mux(self, frame: av.AudioFrame | None) -> None:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
            self.packets += 1

    def _take(self) -> bytes:
        return self._buffer.take() if self._buffer is not None else b""


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
        encoder = AudioEncoder(fmt, sample_rate, file=target, title=title, chapters=chapters)
        encoder.encode(audio)
        encoder.finish()

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, write)
    return path
