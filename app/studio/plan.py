"""From a parsed script to the list of lines to render: who speaks each line, and its key in the project.

A saved voice speaks as saved. A voice designed in the script (`[voice Bob = male, low pitch]`) and the
automatic narrator have no reference clip: one short line of theirs is rendered first and kept as their
voice (its reference), so that they sound the same on every line, in whatever order the lines render.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Container
from dataclasses import dataclass, replace

from engine.text.chunk import stream_chunks
from engine.text.duration import text_weight, weight_per_second

from .project import line_key
from .script import Line, Problem, Script, ScriptError, check_voices

AUTOMATIC = "automatic voice"
# a made voice's reference line, in seconds of speech: long enough to carry the voice, short enough to keep
# every later line's prompt small (upstream advises 3-10 s reference clips)
REFERENCE_S = (2.0, 10.0)


@dataclass(frozen=True)
class Speaker:
    label: str  # as the Studio shows it
    saved: str | None = None  # a saved voice's name
    instruct: str | None = None  # a designed voice's description
    reference: str | None = None  # for a speaker without a saved voice: the text its voice is made from

    @property
    def key(self) -> str:
        """Identity of the sound: what the line keys and the kept voices are made of."""
        if self.saved is not None:
            return f"saved:{self.saved.casefold()}"
        return f"designed:{self.label.casefold()}:{self.instruct}" if self.instruct else "automatic"

    @property
    def needs_voice(self) -> bool:
        """True when its first rendered line becomes its voice (no reference clip of its own)."""
        return self.saved is None


@dataclass(frozen=True)
class Cue:
    key: str
    index: int  # among the script's spoken lines
    chapter: int
    line: Line
    speaker: Speaker


def plan_cues(script: Script, narrator: str | None, saved_voices: list[str], kept: Container[str] = ()) -> list[Cue]:
    """Every spoken line with its speaker and key; raises ScriptError for voices that do not exist, except for lines
    whose key is in `kept` (they have a take): a voice deleted once its lines were rendered leaves the book whole."""
    cues = _cues(script, narrator)
    missing = [c.line for c in cues if c.key not in kept]
    check_voices(script, saved_voices, missing)
    if narrator is not None and narrator.casefold() not in {v.casefold() for v in saved_voices} \
            and any(line.voice is None for line in missing):
        raise ScriptError([Problem(0, f"The narrator voice '{narrator}' is not a saved voice any more: pick "
                                      "another narrator.")])
    references = _references(cues)
    return [replace(c, speaker=replace(c.speaker, reference=references[c.speaker.key])) if c.speaker.needs_voice
            else c for c in cues]


def _cues(script: Script, narrator: str | None) -> list[Cue]:
    """Every spoken line with its speaker and key (the speaker's voice unchecked, its reference line not chosen)."""
    seen: Counter = Counter()
    cues = []
    for chapter_index, chapter in enumerate(script.chapters):
        for line in chapter.lines:
            speaker = _speaker(script, line.voice, narrator)
            options = {name: value for name, value in line.options.items()}
            identity = (speaker.key, line.text, tuple(sorted(options.items())))
            key = line_key(speaker.key, line.text, options, seen[identity])
            seen[identity] += 1
            cues.append(Cue(key, len(cues), chapter_index, line, speaker))
    return cues


def speech_seconds(text: str) -> float:
    """The model's own estimate of how long `text` takes to say at a typical rate."""
    return text_weight(text) / weight_per_second()


def _references(cues: list[Cue]) -> dict[str, str]:
    """Speaker key -> the text its voice is made from: its first line of REFERENCE_S seconds said plainly (no
    speed, instruct or duration of its own), else the start of its first longer line (up to its first
    clause or sentence mark past REFERENCE_S[0], the engine's streaming cut), else its longest line."""
    lines: dict[str, list[Line]] = {}
    for cue in cues:
        if cue.speaker.needs_voice:
            lines.setdefault(cue.speaker.key, []).append(cue.line)
    low, high = REFERENCE_S
    chosen = {}
    for key, spoken in lines.items():
        plain = [line.text for line in spoken if line.options.speed is line.options.instruct is line.options.duration
                 is None] or [line.text for line in spoken]
        text = next((t for t in plain if low <= speech_seconds(t) <= high), None)
        longer = [t for t in plain if speech_seconds(t) > high]
        if text is None and longer:
            text = stream_chunks(longer[0], first_max_seconds=high, max_seconds=high, min_seconds=low)[0]
        chosen[key] = text or max(plain, key=speech_seconds)
    return chosen


def _speaker(script: Script, name: str | None, narrator: str | None) -> Speaker:
    if name is None:
        return Speaker(narrator, saved=narrator) if narrator else Speaker(AUTOMATIC)
    instruct = script.designed_instruct(name)
    return Speaker(name, instruct=instruct) if instruct else Speaker(name, saved=name)
