"""Render lines of a script into takes, in order, storing each take the moment it is done.

`render_lines` is a plain generator: the app runs it as a job on its GPU worker, the command line calls
it directly. Lines render in groups generated together (one batched forward per step, each take equal to
its lone render): the first line alone, so that it is heard soon, then groups doubling in size
(engine.ahead_groups). A line whose sound becomes its speaker's voice ends its group (the lines after it
need that voice); checked lines go one by one (their candidates are the batch). It yields an event when
a line starts and when it is done or failed, so that the caller can play each line while the next ones
render, and show the time left from the real-time factor measured so far. A stop (the `cancel` event)
ends it between diffusion steps; the lines being rendered are lost, every finished one is already in the
project.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from engine.checks.policy import CheckMode
from engine.checks.takes import Checks, checked_take
from engine.config import GenerationConfig
from engine.constants import SAMPLE_RATE
from engine.engine import AHEAD_MAX
from engine.errors import Cancelled, StorageError, VoiceDeskError
from engine.request import SpeechRequest
from engine.text.languages import resolve_language
from engine.text.spoken import spoken_text
from engine.voice import Voice

from ..settings import random_seed
from .plan import Cue, Speaker, speech_seconds
from .project import Project, Take

log = logging.getLogger(__name__)


@dataclass
class RenderEvent:
    kind: str  # start | done | failed | stopped (nothing can be saved: the render ends at this line)
    cue: Cue
    take: Take | None = None
    audio: np.ndarray | None = None  # float32 at the engine's rate, for "done"
    error: str | None = None
    warning: str | None = None  # for "done": the take is kept, but something after it failed (its voice not kept)


@dataclass
class Progress:
    """Lines done of a render, its real-time factor, and the time left.

    The time left is the speech still to render (the model's length estimate per line) times the
    render time per estimated second measured so far: the measured RTF, corrected for how far the
    estimates are from the real lengths."""

    total: int
    done: int = 0
    failed: int = 0
    audio_s: float = 0.0
    render_s: float = 0.0
    estimated_done_s: float = 0.0
    estimated_left_s: float = 0.0

    @classmethod
    def of(cls, cues: list[Cue]) -> Progress:
        return cls(total=len(cues), estimated_left_s=sum(estimate_seconds(c) for c in cues))

    def add(self, event: RenderEvent) -> None:
        if event.kind in ("start", "stopped"):
            return
        estimate = estimate_seconds(event.cue)
        if event.kind == "done":
            self.done += 1
            self.audio_s += event.take.seconds
            self.render_s += event.take.render_s
            self.estimated_done_s += estimate
        else:
            self.failed += 1
        # the sum less each line's estimate as it ends, which floats round: nothing is left once every line has ended
        ended = self.done + self.failed == self.total
        self.estimated_left_s = 0.0 if ended else max(0.0, self.estimated_left_s - estimate)

    @property
    def rtf(self) -> float | None:
        return self.render_s / self.audio_s if self.audio_s > 0 else None

    @property
    def seconds_left(self) -> float | None:
        if self.estimated_done_s <= 0:
            return None
        return self.estimated_left_s * self.render_s / self.estimated_done_s

    @property
    def fraction(self) -> float:
        return (self.done + self.failed) / self.total if self.total else 1.0


def estimate_seconds(cue: Cue) -> float:
    """The model's own length estimate for a line (its option duration when it has one)."""
    if cue.line.options.duration is not None:
        return cue.line.options.duration
    return speech_seconds(cue.line.text) / (cue.line.options.speed or 1.0)


@dataclass
class _Line:
    """A line ready to render: its request, and whether its sound becomes its speaker's voice."""
    cue: Cue
    request: SpeechRequest
    makes_voice: bool


def batch_key(engine, project: Project):
    """The GPU worker's batch key of a render of `project`: its lines share their steps and the scoring (the
    rest is each line's own), so it runs beside generations of the same key (app/worker.py)."""
    return engine.batch_key(GenerationConfig(num_step=project.settings.steps))


def render_lines(engine, project: Project, cues: list[Cue], saved_voice: Callable[[str], Voice],
                 cancel: threading.Event | None = None, new_seed: bool = False,
                 checks: Checks | None = None, speak_numbers: bool = False) -> Iterator[RenderEvent]:
    """Render `cues` in order into `project`. `saved_voice(name)` loads a saved voice; `new_seed` draws a
    fresh seed even for lines whose options fix one (a retake). With `checks`, each line's take is
    checked (retaken, or the best of N kept) by its policy and the take keeps its verdict. `speak_numbers`:
    numbers, dates and currency are spoken as words (the app's "Speak numbers and dates"; upstream's
    normalize_text), in every line and in the reference lines voices are made from."""
    if not cues:  # a finished project run again: no engine was loaded for it (app/studio/cli.py)
        return
    checking = checks is not None and checks.policy.mode != CheckMode.OFF
    voices: dict[str, Voice | None] = {}
    references: dict[str, object] = {}  # speaker -> speaker embedding of its voice, for the voice check
    todo, size = list(cues), 1
    with engine.member():  # other jobs' generations wait for this render's next group, to share its batches
        while todo:
            group: list[_Line] = []
            while todo and len(group) < size and not (group and group[-1].makes_voice):
                cue = todo.pop(0)
                yield RenderEvent("start", cue)
                try:
                    group.append(_prepared(engine, project, cue, voices, saved_voice, new_seed=new_seed,
                                           speak_numbers=speak_numbers, cancel=cancel))
                except Cancelled:
                    raise
                except Exception as err:
                    yield _failure(cue, err)
                    if isinstance(err, StorageError):
                        return
            size = 1 if checking else min(2 * size, AHEAD_MAX)
            for event in _rendered(engine, project, group, voices, references, checks if checking else None,
                                   cancel):
                yield event
                if event.kind == "stopped":
                    return


def _prepared(engine, project: Project, cue: Cue, voices: dict[str, Voice | None],
              saved_voice: Callable[[str], Voice], *, new_seed: bool, speak_numbers: bool,
              cancel: threading.Event | None) -> _Line:
    """The request of `cue`'s line, its speaker's voice found (or made from their reference line first)."""
    speaker, options, settings = cue.speaker, cue.line.options, project.settings
    if speaker.key not in voices:
        voices[speaker.key] = saved_voice(speaker.saved) if speaker.saved else project.voice(speaker.key)
    voice = voices[speaker.key]
    if speaker.needs_voice and voice is None and cue.line.text != speaker.reference:
        voice = voices[speaker.key] = _made_voice(engine, project, speaker, language=options.language,
                                                  speak_numbers=speak_numbers, cancel=cancel)
    seed = options.seed if options.seed is not None and not new_seed else random_seed()
    config = GenerationConfig(num_step=settings.steps, speed=options.speed, duration=options.duration, seed=seed,
                              normalize_text=speak_numbers)
    request = SpeechRequest(text=cue.line.text, voice=voice, instruct=options.instruct or speaker.instruct,
                            language=options.language or settings.language, config=config)
    return _Line(cue, request, makes_voice=speaker.needs_voice and voice is None)


def _rendered(engine, project: Project, group: list[_Line], voices: dict[str, Voice | None], references: dict,
              checks: Checks | None, cancel: threading.Event | None) -> Iterator[RenderEvent]:
    """Render a group's lines together and store each take; a group that fails goes again line by line, so
    that a bad line fails alone."""
    if not group:
        return
    start = time.perf_counter()
    try:
        if checks is not None:
            outcomes = [_checked(engine, line, checks, references, cancel) for line in group]
        else:
            outcomes = [(result, None) for result in engine.render_many([line.request for line in group], cancel)]
    except Cancelled:
        raise
    except Exception as err:
        if len(group) > 1:
            for line in group:
                yield from _rendered(engine, project, [line], voices, references, checks, cancel)
            return
        yield _failure(group[0].cue, err)
        return
    elapsed = time.perf_counter() - start
    total_s = sum(len(result.audio) for result, _ in outcomes) or 1
    for line, (result, verdict) in zip(group, outcomes):
        try:
            take = project.add_take(line.cue.key, result.audio, result.sample_rate, result.seed,
                                    elapsed * len(result.audio) / total_s, verdict.to_json() if verdict else None)
        except Exception as err:
            yield _failure(line.cue, err)
            if isinstance(err, StorageError):
                return
            continue
        problem = _voice_not_kept(engine, project, line, result, voices) if line.makes_voice else None
        yield RenderEvent("done", line.cue, take, result.audio,
                          warning=None if problem is None else f"The take is kept, but it could not become "
                                                               f"{line.cue.speaker.label}'s voice ({_said(problem)}); "
                                                               "their next line makes it again.")
        if isinstance(problem, StorageError):
            yield _failure(line.cue, problem)
            return


def _checked(engine, line: _Line, checks: Checks, references: dict, cancel: threading.Event | None):
    """(result, verdict) of a line's take checked by the policy, against its speaker's voice when it has one."""
    speaker, voice = line.cue.speaker, line.request.voice
    if voice is not None and speaker.key not in references:
        references[speaker.key] = checks.checker.embed(engine.reference_audio(voice), SAMPLE_RATE)
    return checked_take(engine, line.request, cancel=cancel, checks=checks, reference=references.get(speaker.key))


def _failure(cue: Cue, err: Exception) -> RenderEvent:
    """What a line that could not be rendered or stored says: a full or read-only disk fails every line after
    it the same way, so the render stops there; any other error fails this line and the render goes on."""
    if isinstance(err, StorageError):
        return RenderEvent("stopped", cue, error=f"{err} The render stopped at line {cue.line.number}; "
                                                 "rendering again goes on from there.")
    if not isinstance(err, VoiceDeskError):
        log.error("rendering line %d failed", cue.line.number, exc_info=err)  # a bug or a driver error
    return RenderEvent("failed", cue, error=_said(err))


def _said(err: Exception) -> str:
    """An error as the Studio says it: our own errors' messages are for people, anything else names its type."""
    return str(err) if isinstance(err, VoiceDeskError) else f"{type(err).__name__}: {err}"


def _made_voice(engine, project: Project, speaker: Speaker, *, language: str | None, speak_numbers: bool,
                cancel: threading.Event | None) -> Voice:
    """Render the speaker's reference line (a line of theirs still to come, or the start of this long one) and
    keep it as their voice."""
    settings = project.settings
    config = GenerationConfig(num_step=settings.steps, seed=random_seed(), normalize_text=speak_numbers)
    request = SpeechRequest(text=speaker.reference, instruct=speaker.instruct, language=language or settings.language,
                            config=config)
    result = engine.render(request, cancel=cancel)[0]
    return _keep_as_voice(engine, project, speaker, result, said=request)


def _voice_not_kept(engine, project: Project, line: _Line, result, voices: dict[str, Voice | None]) -> Exception | None:
    """Make a reference line's kept take (`result`) its speaker's voice; the error when that fails (logged). The
    take stays: the speaker is left without a voice, so their next line makes one again (_prepared)."""
    speaker = line.cue.speaker
    try:
        voices[speaker.key] = _keep_as_voice(engine, project, speaker, result, said=line.request)
    except Exception as err:
        if not isinstance(err, VoiceDeskError):
            log.error("line %d's take could not become %s's voice", line.cue.line.number, speaker.label,
                      exc_info=err)
        return err
    return None


def _keep_as_voice(engine, project: Project, speaker: Speaker, result, *, said: SpeechRequest) -> Voice:
    """The speaker's reference line as rendered (`result` of the request `said`) becomes their voice, kept in the
    project. Its transcript is what the audio says: with numbers spoken as words, the line as the plan read it
    (its weight sets the speaker's pace in every later line, as Engine.stream's made voice does)."""
    transcript = speaker.reference
    if said.config.normalize_text:
        transcript = spoken_text(transcript, resolve_language(said.language), normalize=True)
    voice = engine.voice_from_clip((result.audio, result.sample_rate), transcript=transcript)
    project.keep_voice(speaker.key, voice)
    return voice


def pending(project: Project, cues: list[Cue]) -> list[Cue]:
    """The lines that have no take yet (what "Render all" and a resumed render do)."""
    return [cue for cue in cues if project.kept(cue.key) is None]
