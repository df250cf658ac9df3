"""A streamed result's chunks reach the player whole, the first one included, from an encoder started
before the first chunk came: Gradio's own streaming audio output (one ffmpeg AAC encoder per stream), with and
without `whole_chunks`."""
import asyncio
import shutil
import time

import gradio as gr
import numpy as np
import pytest

from app.storage import audio_bytes
from gradio.components import audio as gradio_audio

from app.ui.whole_chunks import spare_for, whole_chunks

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="Gradio streams audio through ffmpeg")
RATE = 24000
FRAME_S = 1024 / RATE  # one AAC frame
LOOKAHEAD_S = 3 * FRAME_S  # what the encoder may hold back until the next chunk


def chunk(seconds: float) -> bytes:
    t = np.arange(round(seconds * RATE)) / RATE
    return audio_bytes(np.round(np.sin(2 * np.pi * 220 * t) * 8000).astype(np.int16), RATE, "WAV")


STREAM = "session/run/1/playlist.m3u8"


def segments(audio: gr.Audio, chunks: list[bytes], seen: list | None = None) -> list[float]:
    """The duration of the HLS segment each chunk became (0 when it became none). `seen` gets the stream's
    encoder as it was after each chunk."""
    async def stream() -> list[float]:
        made = []
        try:
            for i, data in enumerate(chunks):
                segment, _ = await audio.stream_output(data, STREAM, first_chunk=i == 0)
                made.append(0.0 if segment is None else segment["duration"])
                if seen is not None:
                    seen.append(gradio_audio._stream_encoders[STREAM].encoder)
        finally:
            audio.end_stream_output(STREAM)
        return made
    return asyncio.run(stream())


def test_each_chunk_becomes_a_whole_segment():
    first, second = segments(whole_chunks(gr.Audio(streaming=True), RATE), [chunk(1.0), chunk(0.8)])
    assert first >= 1.0 - LOOKAHEAD_S  # not held back for the next chunk (the encoder starts meanwhile)
    assert first + second >= 1.8 - LOOKAHEAD_S


def test_a_stream_gets_an_encoder_started_ahead():
    """A stream's first chunk is fed to an encoder (one ffmpeg process) that was started before the chunk
    came, at the rate the chunks have, and another is started for the next stream."""
    audio = whole_chunks(gr.Audio(streaming=True), RATE)
    spares = spare_for(gradio_audio.AacStreamEncoder, RATE, 1)
    deadline = time.monotonic() + 30
    while (ahead := spares.waiting) is None:
        assert time.monotonic() < deadline, "no encoder was started ahead"
        time.sleep(0.05)
    seen = []
    [first] = segments(audio, [chunk(1.0)], seen)
    assert seen == [ahead] and ahead.sample_rate == RATE and ahead.channels == 1
    assert first >= 1.0 - LOOKAHEAD_S
    deadline = time.monotonic() + 30
    while spares.waiting in (None, ahead):
        assert time.monotonic() < deadline, "no encoder was started for the next stream"
        time.sleep(0.05)
