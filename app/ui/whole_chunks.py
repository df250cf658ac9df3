"""A streamed result whose every chunk reaches the player whole, the first one included, from an encoder
that was already running.

Gradio encodes a streamed output with one ffmpeg process (AAC, served as HLS segments) and puts in each
chunk's segment only the frames that process has returned by the time it looks: as soon as it has any,
or after 0.1 s for the first chunk (5 ms for later ones); the rest waits for the next chunk. A new ffmpeg
process takes longer than that to start on a busy computer, so the first segment held one frame (43 ms) and
the first sound waited for the second chunk (docs/latency.md). And it starts that process only when the
first chunk has arrived (200-500 ms on the 2-core test machine): one encoder for the chunks' rate is kept
started ahead, handed to the next stream that needs one, and replaced in the background.
"""
from __future__ import annotations

import io
import logging
import threading
import time
import wave
import weakref

import gradio as gr
from gradio.components import audio as gradio_audio

log = logging.getLogger(__name__)
AAC_FRAME = 1024  # samples per AAC frame
HELD_FRAMES = 2  # frames the encoder may keep until it is fed more (its lookahead and a partial frame)
LIMIT_S = 2.0  # the longest wait for a chunk's frames (a new encoder starts within it)


class SpareEncoder:
    """One encoder started ahead for chunks of `sample_rate` and `channels`: `take` hands it out (None if the
    last one handed out has no successor running yet) and starts the next one in the background."""

    def __init__(self, start, sample_rate: int, channels: int):
        self._start = lambda: start(sample_rate, channels)
        self._lock = threading.Lock()
        self._spare = None
        self._refill()

    @property
    def waiting(self):
        """The encoder that `take` would hand out now, or None."""
        return self._spare

    def take(self):
        with self._lock:
            spare, self._spare = self._spare, None
        self._refill()
        if spare is not None and spare.process.poll() is not None:  # its ffmpeg ended while it waited
            spare.close()
            return None
        return spare

    def _refill(self) -> None:
        threading.Thread(target=self._make, name="voicedesk-spare-encoder", daemon=True).start()

    def _make(self) -> None:
        try:
            encoder = self._start()
        except Exception:  # noqa: BLE001 - the stream then starts its own, as Gradio does
            log.warning("could not start an audio encoder ahead", exc_info=True)
            return
        with self._lock:
            if self._spare is None:
                self._spare, encoder = encoder, None
        if encoder is not None:  # another refill was first
            encoder.close()


_spares: dict[tuple[int, int], SpareEncoder] = {}
_spares_lock = threading.Lock()


def spare_for(start, sample_rate: int, channels: int) -> SpareEncoder:
    """The one SpareEncoder of this process for chunks of this rate (every player shares it)."""
    with _spares_lock:
        key = (sample_rate, channels)
        if key not in _spares:
            _spares[key] = SpareEncoder(start, sample_rate, channels)
        return _spares[key]


def whole_chunks(audio: gr.Audio, sample_rate: int, channels: int = 1) -> gr.Audio:
    """Make the streaming `audio` wait, for each chunk of 16-bit WAV bytes, until the encoder has returned
    the frames of all it was fed but the last `HELD_FRAMES`; a stream's encoder for chunks of `sample_rate`
    and `channels` (what the chunks will be) is one started ahead. An instance override, as in
    components.refuse_urls; with a Gradio that encodes otherwise (no `_encode_chunk`, encoder registry or
    encoder class), `audio` is left as it is."""
    encode = getattr(audio, "_encode_chunk", None)
    encoders = getattr(gradio_audio, "_stream_encoders", None)
    start = getattr(gradio_audio, "AacStreamEncoder", None)
    if encode is None or encoders is None or start is None or not audio.streaming:
        return audio
    spares = spare_for(start, sample_rate, channels)
    counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # encoder -> (samples fed, frames returned)

    def encode_whole(output_id: str, data: bytes):
        slot = encoders.get(output_id)
        if slot is not None and slot.encoder is None and (spare := spares.take()) is not None:
            if not slot.attach(spare):  # the stream ended meanwhile
                spare.close()
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
