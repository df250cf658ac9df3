"""From a parsed script to the list of lines to render: who speaks each line, and its key in the project.

A saved voice speaks as saved. A voice designed in the script (`[voice Bob = male, low pitch]`) and the
automatic narrator have no reference clip: the first line rendered for them is kept as their voice, so
that they sound the same on every later line.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .project import line_key
from .script import Line, Problem, Script, ScriptError, check_voices

AUTOMATIC = "automatic voice"


@dataclass(frozen=True)
class Speaker:
    label: str  # as the Studio shows it
    saved: str | None = None  # a saved voice's name
    instruct: str | None = None  # a designed voice's description

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


def plan_cues(script: Script, narrator: str | None, saved_voices: list[str]) -> list[Cue]:
    """Every spoken line with its speaker and key; raises ScriptError for voices that do not exist."""
    check_voices(script, saved_voices)
    if narrator is not None and narrator.casefold() not in {v.casefold() for v in saved_voices}:
        raise ScriptError([Problem(0, f"The narrator voice '{narrator}' is not a saved voice any more: pick "
                                      "another in the Studio's settings.")])
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


def _speaker(script: Script, name: str | None, narrator: str | None) -> Speaker:
    if name is None:
        return Speaker(narrator, saved=narrator) if narrator else Speaker(AUTOMATIC)
    instruct = script.designed_instruct(name)
    return Speaker(name, instruct=instruct) if instruct else Speaker(name, saved=name)
