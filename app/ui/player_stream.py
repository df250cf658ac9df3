"""The streamed result player's sound: each chunk a handler yields is encoded in this process by the app's
one encoder (app/encoder.AudioEncoder: AAC in ADTS, as Gradio serves it over HLS) and published whole, as one
segment.

Gradio's own path (6.x, gradio/audio_stream_encoder.py) starts an ffmpeg process for a stream when its first
chunk arrives (200-500 ms on the 2-core test machine) and publishes in each segment only the frames that
process has returned by the time it looks, so the first segment held one 43 ms frame and the first sound
waited for the second chunk (docs/latency.md). Here a chunk's segment holds every frame the codec can finish
(all but its lookahead, two frames, which go out with the next chunk or at the end) within milliseconds.

What of Gradio's is replaced, per component: `_encode_chunk(stream_id, data)` (run in a worker thread for each
chunk; returns the segment), `flush_stream_output` and `end_stream_output` (a stream's end), and the registry
of open streams tells a chunk whose stream has ended (Gradio 6.31; pyproject.toml keeps to that line of
releases). With a Gradio that has none of these, the player is left to Gradio, with a warning.
"""
from __future__ import annotations

import io
import logging
import threading
import wave

import anyio
import gradio as gr
import numpy as np
from gradio.components import audio as gradio_audio

from ..encoder import AudioEncoder

log = logging.getLogger(__name__)
CODEC = "aac"  # an ADTS stream: what Gradio's playlists name and browsers play


def in_process_stream(audio: gr.Audio, sample_rate: int) -> gr.Audio:
    """Encode the streaming `audio`'s chunks (16-bit mono WAV bytes at `sample_rate`) here, each one whole.
    Instance overrides, as in components.refuse_urls."""
    flush, end = getattr(audio, "flush_stream_output", None), getattr(audio, "end_stream_output", None)
    open_streams = getattr(gradio_audio, "_stream_encoders", None)
    if not hasattr(audio, "_encode_chunk") or flush is None or end is None or open_streams is None:
        log.warning("Gradio %s streams audio its own way: results stream through its ffmpeg process (install "
                    "ffmpeg) and the first sound comes later", gr.__version__)
        return audio
    streams = _Streams(sample_rate, is_open=lambda stream_id: stream_id in open_streams)

    async def flush_stream_output(stream_id: str):
        await flush(stream_id)  # Gradio forgets the stream (it made no encoder for it)
        return await anyio.to_thread.run_sync(streams.finish, stream_id)

    def end_stream_output(stream_id: str) -> None:
        end(stream_id)
        streams.drop(stream_id)

    audio._encode_chunk = streams.encode
    audio.flush_stream_output = flush_stream_output
    audio.end_stream_output = end_stream_output
    return audio


class _Streams:
    """One AudioEncoder per open stream, made with its first chunk; `is_open(stream_id)` says whether Gradio
    still has the stream (a disconnect or a cancel ends it while a chunk may be in flight)."""

    def __init__(self, sample_rate: int, is_open):
        self.sample_rate = sample_rate
        self._is_open = is_open
        self._encoders: dict[str, AudioEncoder] = {}
        # reentrant: a stream ended by the garbage collector (Gradio ends a dropped stream from a finalizer) may
        # call `drop` on a thread that holds the lock
        self._lock = threading.RLock()

    def encode(self, stream_id: str, data: bytes) -> dict | None:
        """The chunk's segment; None for a stream that has ended (its chunk is dropped, no encoder is made)."""
        pcm = self._samples(data)
        with self._lock:
            encoder = self._encoders.get(stream_id)
        if encoder is None:
            made = AudioEncoder(CODEC, self.sample_rate)  # outside the lock: making it may run a finalizer
            with self._lock:
                if not self._is_open(stream_id):
                    return None
                encoder = self._encoders.setdefault(stream_id, made)
        elif not self._is_open(stream_id):
            return None
        return self._segment(encoder, lambda: encoder.encode(pcm))

    def finish(self, stream_id: str) -> dict | None:
        """The last frames of the stream (what the codec held back), and the stream is forgotten."""
        with self._lock:
            encoder = self._encoders.pop(stream_id, None)
        return None if encoder is None else self._segment(encoder, encoder.finish)

    def drop(self, stream_id: str) -> None:
        with self._lock:
            self._encoders.pop(stream_id, None)

    def _segment(self, encoder: AudioEncoder, write) -> dict | None:
        """What `write` adds, as Gradio's segment; its duration from the frame count (what it decodes to)."""
        before = encoder.packets
        data = write()
        frames = encoder.packets - before
        if not frames:
            return None
        return {"data": data, "duration": frames * encoder.frame_size / self.sample_rate, "extension": f".{CODEC}"}

    def _samples(self, data: bytes) -> np.ndarray:
        with wave.open(io.BytesIO(data), "rb") as reader:
            shape = (reader.getframerate(), reader.getnchannels(), reader.getsampwidth())
            if shape != (self.sample_rate, 1, 2):
                raise ValueError(f"the player streams 16-bit mono WAV chunks at {self.sample_rate} Hz, "
                                 f"not {shape[2] * 8}-bit, {shape[1]} channel(s) at {shape[0]} Hz")
            return np.frombuffer(reader.readframes(reader.getnframes()), np.int16)
