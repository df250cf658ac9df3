"""One `POST /v1/audio/speech`: every input is checked before anything is queued (so a bad request gets
its status, never a stream that breaks), then the generation waits its turn in the API's lane of the
GPU worker, each chunk is encoded as soon as the engine yields it (pcm and wav on the event loop, the
codecs in a thread), and the finished result is stored in the history, marked as made through the API."""
from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
import numpy as np

from engine.audio.pcm import to_int16
from engine.checks.policy import CheckMode
from engine.config import GenerationConfig
from engine.constants import FRAME_RATE, SAMPLE_RATE
from engine.errors import TextInputError, VoiceDeskError
from engine.text.clean import clean_text, has_chinese
from engine.text.instruct import canonical_instruct
from engine.text.languages import resolve_language
from engine.text.limits import MAX_INSTRUCT_CHARS, MAX_TEXT_CHARS, check_length
from engine.text.tokens import encode_text

from .. import generation
from ..answer import stop_early
from ..checks import policy_from
from ..context import AppContext
from ..encoder import EncodeError, open_encoder
from ..live import LiveStream
from ..settings import Settings, random_seed
from .errors import ApiError
from .schemas import SpeechRequest
from .voices import choose_voice

if TYPE_CHECKING:
    from engine.engine import Timings

log = logging.getLogger(__name__)

LANE = "api"  # all API requests share one lane of the GPU worker: they take turns with the app's users


def generation_config(settings: Settings, body: SpeechRequest, seed: int) -> GenerationConfig:
    """What the engine is asked for: each of VoiceDesk's request fields where the request gives it, else the
    app's saved setting; OpenAI's speed 1.0 means the model's own pace."""
    config = settings.generation_config(seed)
    return config.replace(
        num_step=config.num_step if body.steps is None else body.steps,
        guidance_scale=config.guidance_scale if body.guidance is None else body.guidance,
        postprocess_output=config.postprocess_output if body.remove_pauses is None else body.remove_pauses,
        speed=None if body.speed == 1.0 else body.speed,
        normalize_text=config.normalize_text if body.normalize is None else body.normalize)


class SpeechStream:
    """Checks `body` (raising ApiError) and queues the generation; `audio()` yields the encoded audio.

    The samples go from the GPU's thread straight to the event loop (`generation.submit`'s `each`, into a
    LiveStream as the page's live sound does): one thread hop between a part made and its bytes on the socket.
    A thread of the request's own follows the job for what is not urgent (metrics, checks, the history entry)
    and ends the stream with the job's end or error."""

    def __init__(self, ctx: AppContext, body: SpeechRequest, max_waiting: int):
        self.ctx = ctx
        engine = _ready_engine(ctx)
        if body.quality is not None and body.quality != engine.mode.value:
            raise ApiError(400, f"The app runs in '{engine.mode.value}' quality; switch it in the app to use "
                                f"'{body.quality}'.", "quality")
        _check_text(body.input, body.instructions)
        chosen = choose_voice(ctx.library, body.voice_id, body.instructions)
        instruct = _checked_instruct(chosen.instruct, body.input, "instructions" if body.instructions else "voice")
        language = _checked_language(body.language)
        if ctx.worker.waiting(LANE) >= max_waiting:
            raise ApiError(429, f"{max_waiting} API requests are already waiting for the GPU: try again shortly.",
                           code="queue_full", headers={"Retry-After": "1"})
        self.seed = random_seed() if body.seed is None else body.seed
        config = generation_config(ctx.settings, body, self.seed)
        self.request = generation.GenerationRequest(body.input, chosen.voice, instruct, language, config, chosen.label,
                                                    play_on_speakers=False, output_device=None)
        try:
            self.encoder = open_encoder(body.response_format, SAMPLE_RATE)
        except EncodeError as err:  # a format this server cannot make (PyAV not installed)
            raise ApiError(400, str(err), "response_format", "unsupported_response_format") from err
        self.owner = f"api-{secrets.token_hex(4)}"
        self.policy = policy_from(ctx.settings)  # the app's take checks apply to API requests too
        self.verdicts: list[dict] = []
        self.first_part_at: float | None = None  # time.time() when the GPU made the first part
        self.first_timings: Timings | None = None  # the engine's timings of the first part
        self._sent: list[np.ndarray] = []
        self._live = LiveStream()
        self._live.claim()
        self._live.attach(stop=self.cancel)  # the client went away: free the GPU
        self.job, self.metrics = generation.submit(ctx, self.request, owner=self.owner, lane=LANE,
                                                   policy=self.policy, each=self._made)
        self.submitted_at = time.time()
        threading.Thread(target=self._follow, name=f"{self.owner}-follow", daemon=True).start()

    async def audio(self) -> AsyncIterator[bytes]:
        """Encoded audio as the engine makes it (on the event loop). Engine errors are raised here; a request
        stopped by `cancel` ends with engine.errors.Cancelled. Closed before its end, it stops the generation."""
        # pcm and wav are a copy of the samples: encoded here; a codec's work goes to a thread
        encode = _inline if not self.encoder.format.needs_pyav else anyio.to_thread.run_sync
        async with contextlib.aclosing(self._live.pieces()) as pieces:
            async for piece in pieces:
                yield await encode(self.encoder.encode, np.frombuffer(piece, "<i2"))
        yield await encode(self.encoder.finish)

    def server_timing(self, received_at: float) -> str:
        """The Server-Timing header of a response started now (ms): `accept` the request's checks until it was
        queued, `queue` its wait for the GPU, `engine` the job's start until the first part was made, `handoff`
        that part until now; then, inside `engine`, the first part's `text` (the stream's text prepared for it before
        its engine call: cleaned, normalised as far as it reaches, cut into pieces, Timings.text_s), `prepare` (its
        engine call until its batch took it in, Timings.prepare_s: `plan`, the call's planning until it asked for a
        batch, Timings.plan_s, then `batch_wait`, its wait for the batch), `generate` (its batch's steps,
        Timings.generate_s) and `decode` (the rest: its audio decoded after them, and on a GPU a joining call's wait
        for the steps queued before its first, Timings.decode_s)."""
        spans = {"accept": (received_at, self.submitted_at), "queue": (self.submitted_at, self.job.started_at),
                 "engine": (self.job.started_at, self.first_part_at), "handoff": (self.first_part_at, time.time())}
        durations = {name: end - start for name, (start, end) in spans.items() if start is not None and end is not None}
        if self.first_timings is not None:
            first = self.first_timings
            durations |= {"text": first.text_s, "plan": first.plan_s, "batch_wait": first.prepare_s - first.plan_s,
                          "prepare": first.prepare_s, "generate": first.generate_s, "decode": first.decode_s}
        return ", ".join(f"{name};dur={1e3 * seconds:.2f}" for name, seconds in durations.items())

    def checks(self) -> dict | None:
        """The take checks of the parts made so far (docs/checks.md), or None when checks are off."""
        return generation.checks_summary(self.policy, self.verdicts) if self.policy.mode != CheckMode.OFF else None

    def cancel(self) -> None:
        """Stop the generation (its client went away): at its next step if it runs, at once if it still waits (its
        place is freed); logged (CLOSED_EARLY) when it had not ended."""
        stop_early(self.ctx, owner=self.owner, lane=LANE)

    def usage(self) -> dict:
        """OpenAI's usage object: input = text tokens, output = audio frames (25 per second)."""
        text_tokens = len(encode_text(self.ctx.host.engine.tokenizer, self.request.text))
        frames = round(self.metrics.audio_s * FRAME_RATE)
        return {"input_tokens": text_tokens, "output_tokens": frames, "total_tokens": text_tokens + frames}

    def _made(self, chunk) -> None:
        """A part, on the GPU's thread: its samples are sent on at once."""
        if self.first_part_at is None:
            self.first_part_at, self.first_timings = time.time(), chunk.timings
        pcm = to_int16(chunk.audio)
        self._sent.append(pcm)
        self._live.put(pcm)

    def _follow(self) -> None:
        """The job to its end (on this request's thread): metrics and checks of each part, the history entry of a
        finished generation; then the stream ends, with the job's error if it failed or was stopped."""
        try:
            for kind, value in self.job.follow(self.ctx.worker):
                if kind == "item":
                    elapsed, chunk = value
                    self.metrics.add_chunk(elapsed, len(chunk.audio) / SAMPLE_RATE)
                    if chunk.verdict is not None:
                        self.verdicts.append(chunk.verdict.to_json())
            audio = np.concatenate(self._sent) if self._sent else np.zeros(0, np.int16)
            generation.record(self.ctx, self.request, self.job, self.metrics, audio, source="api",
                              checks=self.checks())
        except Exception as err:
            self._live.end(err)
        finally:
            self.job.cancel.set()  # ended either way: nothing more runs for it
        self._live.end()


async def _inline(fn, *args):
    return fn(*args)


def _ready_engine(ctx: AppContext):
    try:
        return ctx.host.engine
    except VoiceDeskError as err:
        raise ApiError(503, str(err), code="model_not_ready", headers={"Retry-After": "5"}) from err


def _check_text(text: str, instructions: str | None) -> None:
    for value, limit, what, param in ((text, MAX_TEXT_CHARS, "text", "input"),
                                      (instructions, MAX_INSTRUCT_CHARS, "voice description", "instructions")):
        try:
            check_length(value, limit, what)
        except TextInputError as err:
            raise ApiError(413, str(err), param, "input_too_long") from err
    try:
        clean_text(text)
    except TextInputError as err:
        raise ApiError(400, str(err), "input") from err


def _checked_instruct(instruct: str | None, text: str, param: str) -> str | None:
    try:
        return canonical_instruct(instruct, use_zh=has_chinese(text))
    except TextInputError as err:
        raise ApiError(400, f"OmniVoice designs voices from attributes only. {err}", param) from err


def _checked_language(language: str | None) -> str | None:
    try:
        return resolve_language(language, strict=True)
    except TextInputError as err:
        raise ApiError(400, str(err), "language") from err
