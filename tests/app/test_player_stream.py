"""The streamed result player (Gradio's streaming `gr.Audio`, HLS of AAC segments) with its chunks encoded in
this process: each chunk becomes one segment holding all but the codec's lookahead, the playlist durations
add up to what the segments decode to, and a chunk of a stream that has ended is dropped."""
import asyncio
import gc
import io

import av
import gradio as gr
import numpy as np
import pytest

from app.encoder import AudioEncoder
from app.storage import audio_bytes
from app.ui.player_stream import in_process_stream

RATE = 24000
FRAME = 1024  # samples in one AAC frame
LOOKAHEAD_S = 3 * FRAME / RATE  # what the codec may hold back until the next chunk: its delay and a partial frame
STREAM = "session/run/1/playlist.m3u8"


def tone(seconds: float, hz: float = 220.0) -> np.ndarray:
    t = np.arange(round(seconds * RATE)) / RATE
    return np.round(np.sin(2 * np.pi * hz * t) * 8000).astype(np.int16)


def stream(audio: gr.Audio, chunks: list[np.ndarray], end_after: int | None = None) -> list[dict | None]:
    """The segment each chunk became, as Gradio drives a streaming output (its `stream_output`), then the
    one the stream's end flushed; with `end_after`, the stream is ended (a disconnect) after that many chunks."""
    async def run() -> list[dict | None]:
        made = []
        for i, pcm in enumerate(chunks):
            if i == end_after:
                audio.end_stream_output(STREAM)
            segment, _ = await audio.stream_output(audio_bytes(pcm, RATE, "WAV"), STREAM, first_chunk=i == 0)
            made.append(segment)
        made.append(await audio.flush_stream_output(STREAM))
        return made
    return asyncio.run(run())


def decoded(*segments: dict | None) -> np.ndarray:
    data = b"".join(s["data"] for s in segments if s is not None)
    with av.open(io.BytesIO(data), format="adts") as container:
        return np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])


def live_encoders() -> int:
    gc.collect()
    return sum(type(o) is AudioEncoder for o in gc.get_objects())


def test_each_chunk_becomes_a_whole_segment():
    first, second, last = stream(in_process_stream(gr.Audio(streaming=True), RATE), [tone(1.0), tone(0.8)])
    assert first["duration"] >= 1.0 - LOOKAHEAD_S  # not held back for the next chunk
    assert first["duration"] + second["duration"] >= 1.8 - LOOKAHEAD_S
    assert last is not None and last["duration"] <= LOOKAHEAD_S + FRAME / RATE  # only the lookahead is left


def test_the_playlist_durations_are_what_the_segments_decode_to():
    """hls.js places each segment by adding up the durations: they must be the decoded lengths (whole
    frames), and the sound must be what was streamed (AAC is lossy: 20 dB of SNR is far below what 64 kbps
    gives a pure tone, far above what a misaligned or broken stream gives)."""
    chunks = [tone(1.0), tone(0.7), tone(1.3)]
    segments = [s for s in stream(in_process_stream(gr.Audio(streaming=True), RATE), chunks) if s is not None]
    for segment in segments:  # each segment on its own, as the player fetches them
        assert segment["duration"] * RATE == pytest.approx(len(decoded(segment)), abs=1e-6)
    sound = decoded(*segments)
    assert sum(s["duration"] for s in segments) * RATE == pytest.approx(len(sound), abs=1e-6)
    sent = np.concatenate(chunks).astype(np.float64) / 32768
    heard = sound[FRAME:FRAME + len(sent)].astype(np.float64)  # the decoder keeps the encoder's priming frame
    snr = 10 * np.log10(np.sum(sent**2) / np.sum((heard - sent) ** 2))
    assert snr > 20, snr


def test_a_chunk_of_an_ended_stream_is_dropped():
    *during, flushed = stream(in_process_stream(gr.Audio(streaming=True), RATE), [tone(1.0), tone(1.0)], end_after=1)
    assert during[0] is not None and during[1] is None and flushed is None


def test_no_encoder_outlives_its_stream():
    """Streams that end normally (flushed) and ones ended early (a disconnect) release their encoders."""
    audio, before = in_process_stream(gr.Audio(streaming=True), RATE), live_encoders()
    stream(audio, [tone(0.5), tone(0.5)])
    stream(audio, [tone(0.5), tone(0.5)], end_after=1)
    assert live_encoders() == before


def test_no_ffmpeg_program_is_needed(monkeypatch, tmp_path):
    """The result streams on a computer without the ffmpeg command line (Gradio's own path needs it)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no program is found
    first, last = stream(in_process_stream(gr.Audio(streaming=True), RATE), [tone(1.0)])
    assert first["duration"] >= 1.0 - LOOKAHEAD_S and last is not None
