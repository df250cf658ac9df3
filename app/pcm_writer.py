"""16-bit PCM with numpy alone (app/encoder.py): the API's `pcm` (the samples, nothing else) and `wav` (a RIFF
header, then the samples), streamed or written to a file, so that serving them needs no PyAV.

The header is FFmpeg's, without its encoder tag: a `fmt ` chunk, the title in a `LIST`/`INFO` chunk when there
is one, then `data`. Streamed, the lengths cannot be known ahead, so they are 0xFFFFFFFF as FFmpeg writes them
(every decoder reads to the end); written to a file that can be rewound, they are filled in at `finish`.
Float samples become int16 as FFmpeg converts them (x 32768, rounded to nearest even, clipped), so a WAV
export holds the same samples as a FLAC one.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .encoder import AudioFormat

UNKNOWN = 0xFFFFFFFF  # a RIFF length not known yet
SAMPLE_BYTES = 2


class PcmWriter:
    """Mono chunks (int16, or float32 in [-1, 1]) as 16-bit little-endian PCM, bare (`pcm`) or in a WAV file.

    `file`: a path or a binary file to write to; None keeps the bytes in memory, and `encode` and `finish`
    return them as they are made (for streaming). `title` goes in a WAV's INFO chunk."""

    def __init__(self, fmt: AudioFormat, sample_rate: int, file: str | Path | BinaryIO | None = None,
                 title: str | None = None):
        self.format = fmt
        self.sample_rate = sample_rate
        self._wav = fmt.muxer == "wav"
        self._title = title
        self._owned = isinstance(file, (str, Path))
        self._file = open(file, "wb") if self._owned else file  # noqa: SIM115 (closed at finish)
        self._header: bytes | None = self._riff_header(UNKNOWN) if self._wav else b""
        self._data_bytes = 0

    @property
    def content_type(self) -> str:
        return self.format.content_type

    def encode(self, pcm: np.ndarray) -> bytes:
        """Add samples [n]; returns the bytes made so far (b"" when writing to a file)."""
        data = _int16(pcm).astype("<i2", copy=False).tobytes()
        self._data_bytes += len(data)
        return self._out(self._take_header() + data)

    def finish(self) -> bytes:
        """The header if nothing was encoded; a file's lengths are filled in and the file closed."""
        out = self._out(self._take_header())
        if self._file is not None:
            if self._wav and self._file.seekable():
                self._file.seek(0)
                self._file.write(self._riff_header(self._data_bytes))
            if self._owned:
                self._file.close()
        return out

    def _take_header(self) -> bytes:
        header, self._header = self._header or b"", b""
        return header

    def _out(self, data: bytes) -> bytes:
        if self._file is None:
            return data
        self._file.write(data)
        return b""

    def _riff_header(self, data_bytes: int) -> bytes:
        fmt = struct.pack("<HHIIHH", 1, 1, self.sample_rate, self.sample_rate * SAMPLE_BYTES, SAMPLE_BYTES,
                          8 * SAMPLE_BYTES)  # PCM, mono, rate, byte rate, block align, bits
        chunks = _chunk(b"fmt ", fmt)
        if self._title:
            chunks += _chunk(b"LIST", b"INFO" + _chunk(b"INAM", self._title.encode("utf-8") + b"\0"))
        data_size = min(data_bytes, UNKNOWN)  # a WAV holds at most 4 GiB of samples (24.8 hours at 24 kHz)
        riff_size = UNKNOWN if data_bytes == UNKNOWN else min(4 + len(chunks) + 8 + data_bytes, UNKNOWN)
        return b"RIFF" + struct.pack("<I", riff_size) + b"WAVE" + chunks + b"data" + struct.pack("<I", data_size)


def _chunk(tag: bytes, body: bytes) -> bytes:
    """A RIFF chunk: its length says the body's, and an odd body is padded to an even length."""
    return tag + struct.pack("<I", len(body)) + body + b"\0" * (len(body) % 2)


def _int16(pcm: np.ndarray) -> np.ndarray:
    pcm = np.asarray(pcm)
    if pcm.dtype == np.int16:
        return pcm
    return np.clip(np.rint(pcm.astype(np.float32) * 32768), -32768, 32767).astype(np.int16)
