"""A streamed result whose every chunk reaches the player whole, the first one included.

Gradio encodes a streamed output with one ffmpeg process (AAC, served as HLS segments) and puts in each
chunk's segment only the frames that process has returned by the time it looks: as soon as it has any,
or after 0.1 s for the first chunk (5 ms for later ones); the rest waits for the next chunk. A new ffmpeg
process takes longer than that to start on a busy computer, so the first segment held one frame (43 ms) and
the first sound waited for the second chunk (docs/latency.md).
"""
from __future__ import annotations

import io
import time
import wave
import weakref

import gradio as gr
from gradio.components import audio as gradio_audio

AAC_FRAME = 1024  # samples per AAC frame
HELD_FRAMES = 2  # frames the encoder may keep until it is fed more (its lookahead and a partial frame)
LIMIT_S = 2.0  # the longest wait for a chunk's frames (a new encoder starts within it)


def whole_chunks(audio: gr.Audio) -> gr.Audio:
    """Make the streaming `audio` wait, for each chunk of 16-bit WAV bytes, until the encoder has returned
    the frames of all it was fed but the last `HELD_FRAMES`. An instance override, as in
    components.refuse_urls; with a Gradio that encodes otherwise (no `_encode_chunk` or encoder registry),
    `audio` is left as it is."""
    encode = getattr(audio, "_encode_chunk", None)
    encoders = getattr(gradio_audio, "_stream_encoders", None)
    if encode is None or encoders is None:
        return audio
    counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # encoder -> (samples fed, frames returned)

    def encode_whole(output_id: str, data: bytes):
        segment = encode(output_id, data)
        slot = encoders.get(output_id)
        encoder = slot.encoder if slot is not None else None
        samples = _wav_samples(data)
        if encoder is None or samples is None:
            return segment
        fed, returned = counts.get(encoder, (0, 0))
        fed += samples
        if segment is not None:
            returned += round(segment["duration"] / encoder.frame_duration)
        due = fed * encoder.output_rate // encoder.sample_rate // AAC_FRAME - HELD_FRAMES
        frames: list[bytes] = []
        deadline = time.monotonic() + LIMIT_S
        while returned + len(frames) < due and (left := deadline - time.monotonic()) > 0:
            more = encoder.take(timeout=left)
            if not more:  # the encoder ended, or the wait ran out
                break
            frames += more
        counts[encoder] = (fed, returned + len(frames))
        if not frames:
            return segment
        head, seconds = (b"", 0.0) if segment is None else (segment["data"], segment["duration"])
        return {"data": head + b"".join(frames), "duration": seconds + len(frames) * encoder.frame_duration,
                "extension": ".aac"}

    audio._encode_chunk = encode_whole
    return audio


def _wav_samples(data: bytes) -> int | None:
    try:
        with wave.open(io.BytesIO(data), "rb") as reader:
            return reader.getnframes()
    except (wave.Error, EOFError):
        return None
