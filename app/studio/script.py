"""The Studio's script, as parsed: chapters of spoken lines and pauses, and the designed voices.

The text format is described in `parse.py`, which reads it; `write.py` writes a script back as text.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import VoiceDeskError

MAX_LINES = 20_000  # spoken lines in one script (a long novel has about 8,000 paragraphs)
MAX_PAUSE_S = 60.0
MAX_REPORTED = 20  # problems listed in one error message

OPTION_NAMES = ("speed", "instruct", "language", "seed", "duration")


@dataclass(frozen=True)
class Options:
    """Per-line settings; None means the project's default."""

    speed: float | None = None
    instruct: str | None = None
    language: str | None = None
    seed: int | None = None
    duration: float | None = None  # target length in seconds (from an SRT cue, say)

    def items(self) -> list[tuple[str, object]]:
        return [(name, getattr(self, name)) for name in OPTION_NAMES if getattr(self, name) is not None]


@dataclass(frozen=True)
class Line:
    """A spoken line. `voice` is a name as written (None: the narrator)."""

    number: int  # 1-based line in the source text
    text: str
    voice: str | None = None
    options: Options = Options()
    paragraph: bool = False  # a blank line (or a chapter start) comes before it


@dataclass(frozen=True)
class Pause:
    number: int
    seconds: float


Item = Line | Pause


@dataclass(frozen=True)
class Chapter:
    title: str | None  # None: what comes before the first heading
    level: int = 1
    number: int = 0  # line of the heading
    items: tuple[Item, ...] = ()

    @property
    def lines(self) -> list[Line]:
        return [item for item in self.items if isinstance(item, Line)]


@dataclass(frozen=True)
class Script:
    chapters: tuple[Chapter, ...]
    designed: dict[str, str] = field(default_factory=dict)  # voice name -> instruct, from [voice X = ...]

    @property
    def lines(self) -> list[Line]:
        return [line for chapter in self.chapters for line in chapter.lines]

    def voice_names(self) -> set[str]:
        """Every voice name the lines use (as written), the narrator excluded."""
        return {line.voice for line in self.lines if line.voice is not None}

    def designed_instruct(self, name: str) -> str | None:
        folded = {key.casefold(): value for key, value in self.designed.items()}
        return folded.get(name.casefold())


@dataclass(frozen=True)
class Problem:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class ScriptError(VoiceDeskError):
    """A script that cannot be rendered; `problems` lists each one with its line number."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        shown = [str(p) for p in self.problems[:MAX_REPORTED]]
        more = len(self.problems) - len(shown)
        if more:
            shown.append(f"... and {more} more")
        super().__init__("The script has problems:\n" + "\n".join(shown))




def check_voices(script: Script, known: list[str] | set[str], lines: list[Line] | None = None) -> None:
    """Raise ScriptError for each line (of `lines`, default all) whose voice is neither a saved voice nor designed in
    the script."""
    known_folded = {name.casefold() for name in known} | {name.casefold() for name in script.designed}
    problems = [Problem(line.number, f"there is no saved voice '{line.voice}' (save it in the Voices tab, or "
                                     f"design it: [voice {line.voice} = female, low pitch])")
                for line in (script.lines if lines is None else lines)
                if line.voice is not None and line.voice.casefold() not in known_folded]
    if problems:
        raise ScriptError(problems)
