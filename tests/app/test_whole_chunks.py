"""A streamed result's chunks reach the player whole, the first one included: Gradio's own streaming
audio output (one ffmpeg AAC encoder per stream), with and without `whole_chunks`."""
import asyncio
import shutil

import gradio as gr
import numpy as np
import pytest

from app.storage import audio_bytes
from app.ui.whole_chunks import whole_chunks

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="Gradio streams audio through ffmpeg")
RATE = 24000
FRAME_S = 1024 / RATE  # one AAC frame
LOOKAHEAD_S = 3 * FRAME_S  # what the encoder may hold back until the next chunk


def chunk(seconds: float) -> bytes:
    t = np.arange(round(seconds * RATE)) / RATE
    return audio_bytes(np.round(np.sin(2 * np.pi * 220 * t) * 8000).astype(np.int16), RATE, "WAV")


def segments(audio: gr.Audio, chunks: list[bytes]) -> list[float]:
    """The duration of the HLS segment each chunk became (0 when it became none)."""
    async def stream() -> list[float]:
        made = []
        try:
            for i, data in enumerate(chunks):
                segment, _ = await audio.stream_output(data, "session/run/1/playlist.m3u8", first_chunk=i == 0)
                made.append(0.0 if segment is None else segment["duration"])
        finally:
            audio.end_stream_output("session/run/1/playlist.m3u8")
        return made
    return asyncio.run(stream())


def test_each_chunk_becomes_a_whole_segment():
    first, second = segments(whole_chunks(gr.Audio(streaming=True)), [chunk(1.0), chunk(0.8)])
    assert first >= 1.0 - LOOKAHEAD_S  # not held back for the next chunk (the encoder starts meanwhile)
    assert first + second >= 1.8 - LOOKAHEAD_S
