"""The encoder for every format but raw PCM (app/encoder.py): FFmpeg's own libraries in this process, through
PyAV, which only this module imports (serving `pcm` and `wav` needs no PyAV: app/pcm_writer.py).

Streaming-safe: `encode` returns every complete frame of the chunk at once (Ogg pages are closed
every 20 ms instead of every second), so a client can play one sentence while the next is made;
only what the codec needs to finish a frame (under one frame, at most ~50 ms) waits for the next
chunk or `finish`. In memory the output cannot be rewound, so FLAC headers carry no length
(every decoder reads to the end); given a real file, the headers are completed at `finish`.

Why PyAV and not the ffmpeg command line (docs/api.md has the figures): the command line is 0.3-0.4 s
to start, and it holds back most of a chunk until more input arrives.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import av
import numpy as np

from .encoder import AudioFormat, ChapterMark

_SAMPLE_FORMATS = {np.dtype(np.int16): "s16", np.dtype(np.float32): "flt"}


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


class AvEncoder:
    """Encode mono chunks (int16, or float32 in [-1, 1]) into one stream of `fmt` (app/encoder.open_encoder).

    `file`: a path or a binary file to write to; None keeps the bytes in memory, and `encode` and
    `finish` return them as they are made (for streaming). `title` and `chapters` go in the container
    where it has room for them (MP3, MP4)."""

    def __init__(self, fmt: AudioFormat, sample_rate: int, file: str | Path | BinaryIO | None = None,
                 title: str | None = None, chapters: list[ChapterMark] = ()):
        self.format = fmt
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

    @property
    def content_type(self) -> str:
        return self.format.content_type

    def encode(self, pcm: np.ndarray) -> bytes:
        """Add samples [n]; returns the bytes made so far (b"" when writing to a file)."""
        pcm = np.ascontiguousarray(pcm)
        if pcm.dtype not in _SAMPLE_FORMATS:  # float64 is scaled as float32 is, never cast to int16 (silence)
            pcm = pcm.astype(np.float32 if np.issubdtype(pcm.dtype, np.floating) else np.int16)
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

    def _take(self) -> bytes:
        return self._buffer.take() if self._buffer is not None else b""
