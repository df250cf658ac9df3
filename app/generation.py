"""One generation, as the Clone and Voice design tabs run it: queue on the GPU worker, stream chunks to
the browser (and the speakers), keep live metrics, then store the result in the history.

`run` yields (outputs, saved): outputs for the output panel's components in `OUTPUTS` order, and
whether this update is the finished result, now stored in the history.
"""
from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass

import gradio as gr
import numpy as np

from engine.config import GenerationConfig
from engine.constants import SAMPLE_RATE
from engine.errors import Cancelled
from engine.verify.policy import VerifyMode, VerifyPolicy
from engine.verify.takes import Checks
from engine.voice import Voice

from .checks import badge_html, policy_from
from .context import AppContext
from .history import HistoryEntry
from .metrics import LiveMetrics
from .playback import SpeakerPlayer, SpeakersUnavailable
from .storage import audio_bytes
from .ui.output import download_links
from .ui.waiting import in_line
from .worker import Job

OUTPUTS = ("audio", "status", "metrics_html", "metrics_json", "downloads", "checks_html", "checks_json")
UNCHANGED = object()  # an output left as it is


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


def to_int16(audio: np.ndarray) -> np.ndarray:
    """Gradio normalises float chunks by their own peak, which makes loudness jump: send int16."""
    return np.round(np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)


def submit(ctx: AppContext, request: GenerationRequest, owner: str, lane: str | None = None,
           policy: VerifyPolicy | None = None) -> tuple[Job, LiveMetrics]:
    """Queue one generation on the GPU worker: its items are (seconds since it started, AudioChunk).
    With a `policy` other than off, each chunk's take is checked and carries its verdict."""
    engine = ctx.host.engine
    metrics = LiveMetrics(mode=_mode_label(engine.mode.value), backend=engine.backend, demo=engine.is_demo,
                          seed=request.config.seed)

    def produce(cancel):
        start = time.perf_counter()
        checked = policy is not None and policy.mode != VerifyMode.OFF
        checks = Checks(policy, ctx.checks.verifier()) if checked else None  # on the worker: may load models
        for chunk in engine.stream(request.text, request.voice, request.instruct, request.language,
                                   request.config, cancel=cancel, checks=checks):
            yield time.perf_counter() - start, chunk

    return ctx.worker.submit(produce, owner=owner, lane=lane), metrics


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


def run(ctx: AppContext, request: GenerationRequest, owner: str) -> Iterator[tuple[tuple, bool]]:
    rate = SAMPLE_RATE
    notices = list(request.voice.notes) if request.voice is not None else []  # e.g. only the start of a long clip
    player = _open_speakers(request, rate, notices)
    policy = policy_from(ctx.settings)
    checked = policy.mode != VerifyMode.OFF
    parts: list[dict] = []  # the verdict of each streamed part, when checked
    job, metrics = submit(ctx, request, owner, policy=policy)
    ctx.live[owner] = metrics  # where the page's own first-sound figure arrives
    pieces: list[np.ndarray] = []
    finished = stopped = False
    try:
        for kind, value in job.follow(ctx.worker):
            if kind == "waiting":
                yield _update(metrics, status=in_line(value)), False
            elif kind == "item":
                elapsed, chunk = value
                pieces.append(to_int16(chunk.audio))  # int16 halves what a long text holds in memory
                metrics.add_chunk(elapsed, len(chunk.audio) / rate)
                player = _feed(player, chunk.audio, notices)
                status = _status(f"Generating… part {chunk.index + 1} is playing", notices)
                # WAV bytes, not an array: Gradio would store every chunk as a file in its cache
                audio = audio_bytes(pieces[-1], rate, "WAV")
                if chunk.verdict is not None:
                    parts.append(chunk.verdict.to_json())
                yield _update(metrics, audio=audio, status=status,
                              checks=checks_summary(policy, parts) if checked else UNCHANGED), False
        finished = True
    except Cancelled:
        if job.abandoned or not pieces:  # nobody is there to hear it, or nothing was made yet
            yield _update(metrics, status=_status(f"Stopped after {metrics.audio_s:.1f} s of audio.", notices)), False
            return
        stopped = True  # Stop keeps what was made so far
    finally:
        job.cancel.set()  # the browser went away or the request ended: free the GPU either way
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
    yield _update(metrics, status=_status(done, notices), downloads=download_links(entry.id),
                  checks=checks_summary(policy, parts) if checked else None), True


def idle_outputs(status: str = "") -> tuple:
    """The output panel reset for a new request. The player is emptied by a property update: a plain None
    would open its stream now, and a player handed a stream with no audio yet waits a whole playlist
    reload (1 s) before it looks again (docs/latency.md)."""
    return gr.update(value=None), status, gr.skip(), None, download_links(None), "", None


def _update(metrics: LiveMetrics, audio=None, status=None, downloads=None, checks=UNCHANGED) -> tuple:
    skip = gr.skip()
    if checks is UNCHANGED:
        checks_out = (skip, skip)
    else:  # None: this generation is not checked
        checks_out = ("", None) if checks is None else (badge_html(checks["parts"], checks["skipped"]), checks)
    return (skip if audio is None else audio, skip if status is None else status, metrics.to_html(),
            metrics.to_json(), skip if downloads is None else downloads, *checks_out)


def checks_summary(policy: VerifyPolicy, parts: list[dict]) -> dict:
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


def _mode_label(mode: str) -> str:
    return {"hifi": "High fidelity", "realtime": "Realtime", "eager": "Reference (eager)"}.get(mode, mode)
