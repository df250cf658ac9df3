"""A spoken answer whose text arrives in pieces (a language model still writing it): each clause goes to the GPU
worker the moment it is complete (engine/text/clauses.py), one job per clause in the answer's lane, and its audio
comes back in order. The Wyoming server (app/wyoming/) and the API's WebSocket (app/api/answer_socket.py) speak
through it; a whole text given at once goes through `speak_whole`, the engine's own streamed path, as the API's.

One voice for the whole answer: a saved voice is the reference of every clause; an automatic voice (no saved
voice, no attributes) is the first clause's own, carried on as reference, as Engine.stream does for long text.
Clause i is seeded offset_seed(seed, i) (engine/config.py), as Engine.stream seeds its pieces.

With the app's take checks on, each clause is checked by their policy within a latency budget (engine/checks/
budget.py: what checks and retakes may add to a clause after its first take(s)); a budget of 0 turns them off for
the answer. The voice check's reference embedding is made once per answer.

A whole answer, once every clause is spoken, is stored in the History as one entry, as a speech request is: its
text as it was written (its pieces joined, so no space comes between the clauses of a script written without
them), exactly the audio sent, the voice, mode, seed and checks; `source` is its lane (the protocol). An answer
stopped before its end (the client went away) is not stored, as a speech request is not.
"""
from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from engine.audio.pcm import to_int16
from engine.checks.budget import DEFAULT_BUDGET_MS, CheckBudget
from engine.checks.policy import CheckMode, CheckPolicy
from engine.checks.takes import Checks, checked_take
from engine.config import GenerationConfig, offset_seed
from engine.constants import SAMPLE_RATE
from engine.errors import TextInputError
from engine.request import SpeechRequest
from engine.text.clauses import ClauseBuffer, ClauseRules
from engine.text.limits import MAX_TEXT_CHARS
from engine.voice import Voice

from . import generation
from .api.voices import ChosenVoice
from .checks import policy_from
from .context import AppContext
from .metrics import LiveMetrics
from .settings import random_seed
from .worker import Job, outcome

log = logging.getLogger(__name__)

# logged with the lane once an answer's jobs are stopped before its end (its client went away, or was refused)
CLOSED_EARLY = "an answer (%s) was closed before its end: its generation was stopped"


class AnswerTooLong(TextInputError):
    """More text than one answer may hold (MAX_TEXT_CHARS)."""


@dataclass(frozen=True)
class SpokenClause:
    index: int
    text: str
    start_s: float  # where its audio begins in the answer's audio
    pcm: np.ndarray  # int16 mono at SAMPLE_RATE
    complete_at: float  # time.perf_counter() when its last character had arrived (the clause was let go)
    queue_s: float  # from then until the GPU began it
    engine_s: float  # the GPU's time for it: the job's start to its audio, made
    checks: dict | None = None  # its take's checks (Verdict.to_json: what ran, what was skipped and why), if on

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / SAMPLE_RATE

    def timing(self) -> dict[str, float]:
        """Where the time to this clause's audio went, in ms, for the protocols to tell their clients."""
        return {"queue": round(1e3 * self.queue_s, 1), "engine": round(1e3 * self.engine_s, 1)}


class StreamedAnswer:
    """`add` text as it arrives, `finish` at its end; `clauses()` yields each clause's audio in order. Call all
    three on one event loop. `cancel` stops every job of the answer (the GPU goes to the next one)."""

    def __init__(self, ctx: AppContext, chosen: ChosenVoice, *, language: str | None, config: GenerationConfig,
                 lane: str, rules: ClauseRules = ClauseRules(), check_budget_ms: int = DEFAULT_BUDGET_MS):
        _ready = ctx.host.engine  # raises VoiceDeskError while the model loads; each clause takes the model of then
        self.ctx = ctx
        self.owner = f"answer-{secrets.token_hex(4)}"
        self._chosen, self._language, self._lane = chosen, language, lane
        self._config = config if config.seed is not None else config.replace(seed=random_seed())
        self._voice = chosen.voice  # after the first clause: the voice carried on
        # the app's take checks apply to answers too, within the budget (0: off for this answer)
        self._policy = policy_from(ctx.settings) if check_budget_ms > 0 else CheckPolicy()
        self._budget_ms = check_budget_ms
        self._budget = CheckBudget(check_budget_ms / 1e3) if check_budget_ms > 0 else None
        self._reference = None  # the voice's speaker embedding, for the voice check (made on the GPU worker)
        self._buffer = ClauseBuffer(rules)
        self._received = 0
        self._pieces: list[str] = []  # the text as it arrived, for the History
        self._count = 0
        self._finished = False
        self._jobs: asyncio.Queue[tuple[int, str, float, Job] | None] = asyncio.Queue()
        self._made_by: tuple[str, str, bool] | None = None  # the last clause's model: mode, backend, demo

    @property
    def seed(self) -> int:
        return self._config.seed

    def checks(self) -> dict:
        """How the clauses are checked, for the protocols to say when the answer starts: the mode ("off": the
        app's checks are off, or the budget is 0), the budget in ms, and the checks that cannot run on this
        computer, each with why (their models are not here: the other checks still run)."""
        if self._policy.mode == CheckMode.OFF:
            return {"mode": CheckMode.OFF.value}
        off = {name: f"its model ({model.repo_id}) is not on this computer"
               for name, model in self.ctx.checks.missing().items()}
        return {"mode": self._policy.mode.value, "budget_ms": self._budget_ms, "off": off}

    def add(self, text: str) -> list[str]:
        """The next piece of the text; the clauses it completed, each queued on the GPU worker at once. Raises
        TextInputError for a piece that is not a string, or once the answer is longer than MAX_TEXT_CHARS."""
        if not isinstance(text, str):
            raise TextInputError(f"The text to speak must be a string, not {type(text).__name__}.")
        if self._finished:
            raise TextInputError("The answer has ended: start a new one.")
        self._received += len(text)
        self._pieces.append(text)
        if self._received > MAX_TEXT_CHARS:
            raise AnswerTooLong(f"The answer is over {MAX_TEXT_CHARS:,} characters long, the limit of one text: "
                                 "split it into several answers.")
        return self._queue(self._buffer.add(text))

    def finish(self) -> list[str]:
        """The text has ended: the clauses left are queued; `clauses()` ends after them."""
        if self._finished:
            return []
        self._finished = True
        clauses = self._queue(self._buffer.finish())
        self._jobs.put_nowait(None)
        return clauses

    async def clauses(self) -> AsyncIterator[SpokenClause]:
        """Each clause's audio, in order, as soon as it is made; raises the engine's error of a clause. After the
        last one, the answer is stored in the History."""
        start, spoken, first_job = 0.0, [], None
        while (queued := await self._jobs.get()) is not None:
            index, text, complete_at, job = queued
            result, verdict, began, made = await asyncio.to_thread(outcome, self.ctx.worker.result(job))
            clause = SpokenClause(index, text, start, to_int16(result.audio), complete_at,
                                  queue_s=began - complete_at, engine_s=made - began,
                                  checks=None if verdict is None else verdict.to_json())
            start += clause.duration_s
            first_job = first_job or job
            spoken.append(clause)
            yield clause
        if spoken:
            await asyncio.to_thread(self._store, spoken, first_job)

    def cancel(self) -> int:
        """Stop its jobs, waiting or running, if it was closed before its end (`stop_early`: logged): how many were
        stopped (0: none was left; once every clause was spoken, a job's result goes out after it left the worker)."""
        self._finished = True
        return stop_early(self.ctx, owner=self.owner, lane=self._lane)

    def _store(self, spoken: list[SpokenClause], first_job: Job) -> None:
        """The answer as one History entry (generation.record, as a speech request): its first audio and RTF are
        the engine's, its clauses' GPU time summed (the waits for text between them left out)."""
        mode, backend, demo = self._made_by
        metrics = LiveMetrics(mode=generation.mode_label(mode), backend=backend, demo=demo, seed=self.seed)
        engine_s = 0.0
        for clause in spoken:
            engine_s += clause.engine_s
            metrics.add_chunk(engine_s, clause.duration_s)
        request = generation.GenerationRequest("".join(self._pieces).strip(), self._chosen.voice,
                                               self._chosen.instruct, self._language, self._config,
                                               self._chosen.label, play_on_speakers=False, output_device=None)
        checks = generation.checks_summary(self._policy, [c.checks for c in spoken]) \
            if self._policy.mode != CheckMode.OFF else None
        generation.record(self.ctx, request, first_job, metrics, np.concatenate([c.pcm for c in spoken]),
                          source=self._lane, checks=checks)

    def _queue(self, clauses: list[str]) -> list[str]:
        now = time.perf_counter()
        for text in clauses:
            index = self._count
            self._count += 1
            job = self.ctx.worker.submit(lambda cancel, i=index, t=text: self._speak(i, t, cancel), owner=self.owner,
                                         lane=self._lane)
            self._jobs.put_nowait((index, text, now, job))
        return clauses

    def _speak(self, index: int, text: str, cancel: threading.Event):
        """One clause, on the GPU worker (the clauses of an answer run in order: one lane, first in first out):
        its SynthesisResult, the Verdict of its take's checks (None while they are off), and when the job began
        and ended (time.perf_counter()). With the app's take checks on, the take is checked, retaken or picked
        from several by their policy (docs/checks.md), as Engine.stream does; checks whose models are not here
        are skipped, and the verdict says so."""
        began = time.perf_counter()
        engine = self.ctx.host.engine  # the model of now: a mode switch mid-answer (a job before this) replaced it
        self._made_by = (engine.mode.value, engine.backend, engine.is_demo)
        request = SpeechRequest(text=text, voice=self._voice, instruct=self._chosen.instruct,
                                language=self._language, config=self._config.replace(
                                    seed=offset_seed(self._config.seed, index)))
        checks = Checks(self._policy, self.ctx.checks.checker()) if self._policy.mode != CheckMode.OFF else None
        if checks is None:
            result, verdict = engine.render(request, cancel=cancel)[0], None
        else:
            if self._reference is None and self._voice is not None:  # once: None only without a speaker model
                self._reference = checks.checker.embed_reference(lambda: engine.reference_audio(self._voice),
                                                                 SAMPLE_RATE)
            result, verdict = checked_take(engine, request, cancel=cancel, checks=checks,
                                           reference=self._reference, budget=self._budget)
        if self._voice is None and self._chosen.instruct is None:
            self._voice = Voice.of_generated(result.tokens[0], text)
            self._reference = checks.checker.embed(result.audio, SAMPLE_RATE) if checks is not None else None
        return result, verdict, began, time.perf_counter()


async def speak_whole(ctx: AppContext, chosen: ChosenVoice, text: str, *, language: str | None,
                      config: GenerationConfig, lane: str) -> AsyncIterator[np.ndarray]:
    """A whole text through the engine's own streamed path (Engine.stream: a short first piece, then sentences
    generated ahead in batches), as the API's speech: its int16 pieces as they are made. Closed early (the
    client went away), the generation stops at its next step and CLOSED_EARLY is logged."""
    owner = f"answer-{secrets.token_hex(4)}"
    request = generation.GenerationRequest(text, chosen.voice, chosen.instruct, language, config, chosen.label,
                                           play_on_speakers=False, output_device=None)
    job, _ = generation.submit(ctx, request, owner=owner, lane=lane)
    events = job.follow(ctx.worker)
    try:
        while (event := await asyncio.to_thread(next, events, None)) is not None:
            kind, value = event
            if kind == "item":
                yield to_int16(value[1].audio)
    except (GeneratorExit, asyncio.CancelledError):  # closed before its end (its job's own end raises others)
        stop_early(ctx, owner=owner, lane=lane)
        raise


def stop_early(ctx: AppContext, *, owner: str, lane: str) -> int:
    """Stop every job of `owner`, waiting or running (the GPU goes to the next one): how many were stopped.
    CLOSED_EARLY is logged with `lane` when any was, so an answer closed before its end shows in the log."""
    stopped = ctx.worker.cancel(owner)
    if stopped:
        log.info(CLOSED_EARLY, lane)
    return stopped
