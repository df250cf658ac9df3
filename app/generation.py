"""One generation, as the Clone and Voice design tabs and the live player run it: queue on the GPU worker,
stream chunks (to whoever listens, and the speakers), keep live metrics, then store the result in the history.

Free of Gradio: `run` yields `Progress` values, each saying what changed; the tabs turn them into their
components' updates (app/ui/output.py), other front ends into theirs.
"""
from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.audio.pcm import to_int16
from engine.checks.policy import CheckMode, CheckPolicy
from engine.checks.takes import Checks
from engine.config import MODE_NAMES, GenerationConfig, Mode
from engine.constants import SAMPLE_RATE
from engine.errors import Cancelled
from engine.voice import Voice

from .checks import policy_from
from .context import AppContext
from .history import HistoryEntry
from .live import LiveStream
from .metrics import LiveMetrics
from .playback import SpeakerPlayer, SpeakersUnavailable
from .waiting import in_line
from .worker import Job

if TYPE_CHECKING:
    from engine.engine import AudioChunk


@dataclass
class GenerationRequest:
    text: str
    voice: Voice | None
    instruct: str | None
    language: str | None
    config: GenerationConfig
    voice_label: str  # for the history: a saved voice's name, "reference clip" or the instruct
    play_on_speakers: bool
    output_device: str | None


@dataclass(frozen=True)
class Progress:
    """What a generation reports, one step at a time. `phase` is "waiting" (in line), "part" (a new part of
    the audio was made), "finished" (stored in the history: `entry_id`) or "ended" (stopped before any audio:
    nothing stored)."""
    phase: str
    status: str
    metrics: LiveMetrics
    pcm: np.ndarray | None = None  # "part": the new part's int16 samples, exactly as they are stored
    checks: dict | None = None  # the checks so far (checks_summary); None while unchecked or not yet known
    checked: bool = False  # whether this generation's parts are checked at all
    entry_id: str | None = None  # "finished": the history entry (its downloads)

    @property
    def saved(self) -> bool:
        return self.entry_id is not None


def submit(ctx: AppContext, request: GenerationRequest, owner: str, lane: str | None = None,
           policy: CheckPolicy | None = None,
           each: Callable[[AudioChunk], object] | None = None) -> tuple[Job, LiveMetrics]:
    """Queue one generation on the GPU worker: its items are (seconds since it started, AudioChunk).
    With a `policy` other than off, each chunk's take is checked and carries its verdict. The job may run beside
    other generations of the same batch key, checked or not, sharing the engine's batches. `each(chunk)`
    is called on the GPU's thread the moment a chunk is made, before the job's followers get it: the live
    listeners' way, one thread hop shorter (keep it short: the GPU waits for it)."""
    engine = ctx.host.engine
    metrics = LiveMetrics(mode=mode_label(engine.mode.value), backend=engine.backend, demo=engine.is_demo,
                          seed=request.config.seed)

    checked = policy is not None and policy.mode != CheckMode.OFF

    def produce(cancel):
        start = time.perf_counter()
        checks = Checks(policy, ctx.checks.checker()) if checked else None  # on the worker: may load models
        for chunk in engine.stream(request.text, request.voice, instruct=request.instruct, language=request.language,
                                   config=request.config, cancel=cancel, checks=checks):
            elapsed = time.perf_counter() - start
            if each is not None:
                each(chunk)
            yield elapsed, chunk

    # generations of compatible settings run side by side, batched by the engine; the checks of checked ones take
    # turns (engine/checks/checker.py)
    return ctx.worker.submit(produce, owner=owner, lane=lane, batch=engine.batch_key(request.config)), metrics


def record(ctx: AppContext, request: GenerationRequest, job: Job, metrics: LiveMetrics, audio: np.ndarray,
           **extra) -> HistoryEntry:
    """Store a finished generation in the history: `audio` is exactly the int16 samples that were sent; `started`
    says when the GPU began it (entries are stored as their handlers finish, which under load is not quite the
    order the GPU ran them)."""
    started = None if job.started_at is None else \
        dt.datetime.fromtimestamp(job.started_at, dt.timezone.utc).isoformat(timespec="milliseconds")
    return ctx.history.add(audio, SAMPLE_RATE, request.text, started=started, voice=request.voice_label,
                           mode=metrics.mode, backend=metrics.backend, rtf=metrics.to_json()["rtf"],
                           first_audio_s=metrics.first_audio_s, audio_s=metrics.audio_s,
                           seed=request.config.seed, language=request.language, demo=metrics.demo,
                           heard_first_audio_s=metrics.heard_first_audio_s, **extra)


def run(ctx: AppContext, request: GenerationRequest, owner: str,
        live: LiveStream | None = None) -> Iterator[Progress]:
    """With `live`, each part's samples are published there the moment the GPU makes them (the page's live
    player), before this generator sees them."""
    rate = SAMPLE_RATE
    notices = list(request.voice.notes) if request.voice is not None else []  # e.g. only the start of a long clip
    player = _open_speakers(request, rate, notices)
    policy = policy_from(ctx.settings)
    checked = policy.mode != CheckMode.OFF
    parts: list[dict] = []  # the verdict of each streamed part, when checked
    publish = None if live is None else (lambda chunk: live.put(to_int16(chunk.audio)))
    job, metrics = submit(ctx, request, owner, policy=policy, each=publish)
    metrics.live_id = None if live is None else live.live_id
    ctx.live[owner] = metrics  # where the page's own first-sound figure arrives
    if live is not None:
        live.attach(stop=job.cancel.set)  # the page stopped listening: the GPU goes to the next job

    def progress(phase: str, status: str, **fields) -> Progress:
        checks = checks_summary(policy, parts) if checked and phase != "waiting" else None
        return Progress(phase, _status(status, notices), metrics, checks=checks, checked=checked, **fields)

    pieces: list[np.ndarray] = []
    finished = stopped = False
    try:
        for kind, value in job.follow(ctx.worker):
            if kind == "waiting":
                yield Progress("waiting", in_line(value), metrics, checked=checked)
            elif kind == "item":
                elapsed, chunk = value
                pieces.append(to_int16(chunk.audio))  # int16 halves what a long text holds in memory
                metrics.add_chunk(elapsed, len(chunk.audio) / rate)
                player = _feed(player, chunk.audio, notices)
                if chunk.verdict is not None:
                    parts.append(chunk.verdict.to_json())
                yield progress("part", f"Generating… part {chunk.index + 1} is playing", pcm=pieces[-1])
        finished = True
    except Cancelled:
        if job.abandoned or not pieces:  # nobody is there to hear it, or nothing was made yet
            yield progress("ended", f"Stopped after {metrics.audio_s:.1f} s of audio.")
            return
        stopped = True  # Stop keeps what was made so far
    finally:
        job.cancel.set()  # the listener went away or the request ended: free the GPU either way
        if player is not None and finished:
            player.finish()  # let the queued audio play out
        elif player is not None:
            player.stop()
    # the files hold exactly the samples that were streamed
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.int16)
    with metrics.lock:  # a first-sound figure arriving now goes into this entry, or is added to it after
        entry = record(ctx, request, job, metrics, audio, checks=checks_summary(policy, parts) if checked else None,
                       **({"stopped": True} if stopped else {}))
        metrics.history_id = entry.id
    if stopped:
        done = f"Stopped after {metrics.audio_s:.1f} s of audio: what was made is saved in the history."
    else:
        done = f"Done: {metrics.audio_s:.1f} s of audio in {metrics.elapsed_s:.2f} s. Saved in the history."
    yield progress("finished", done, entry_id=entry.id)


def checks_summary(policy: CheckPolicy, parts: list[dict]) -> dict:
    """What the badge, the APIs and the history get: the rules and every checked part so far."""
    skipped = {name: why for part in parts for name, why in part["skipped"].items()}
    return {"mode": policy.mode.value, "passed": all(p["passed"] for p in parts), "parts": list(parts),
            "skipped": skipped}


def _open_speakers(request: GenerationRequest, rate: int, notices: list[str]) -> SpeakerPlayer | None:
    if not request.play_on_speakers:
        return None
    try:
        return SpeakerPlayer(rate, request.output_device)
    except SpeakersUnavailable as err:
        notices.append(str(err))
        return None


def _feed(player: SpeakerPlayer | None, audio: np.ndarray, notices: list[str]) -> SpeakerPlayer | None:
    if player is None:
        return None
    try:
        player.feed(audio)
        return player
    except SpeakersUnavailable as err:  # device unplugged mid-way: carry on in the browser
        notices.append(str(err))
        return None


def _status(message: str, notices: list[str]) -> str:
    return "\n\n".join([message, *(f"ⓘ {n}" for n in notices)])


def mode_label(mode: str) -> str:
    return Mode(mode).label if mode in MODE_NAMES else mode
