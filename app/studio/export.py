"""Put a project's kept takes end to end (with its pauses and gaps) and export the book or its chapters,
with chapter marks and an SRT of where each line really is in the audio."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import srt

from engine.constants import SAMPLE_RATE
from engine.errors import VoiceDeskError

from ..encoder import ChapterMark, write_file
from ..loudness import normalize_loudness
from .plan import Cue
from .project import Project
from .script import Line, Pause, Script

SUFFIXES = (".m4b", ".mp3", ".flac", ".wav")


class ExportError(VoiceDeskError):
    """A project that cannot be exported yet (lines without a take)."""


@dataclass
class Timeline:
    audio: np.ndarray  # float32
    rate: int
    chapters: list[ChapterMark]
    subtitles: list[tuple[float, float, str]]  # start s, end s, text

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.rate


def assemble(project: Project, script: Script, cues: list[Cue], chapters: list[int] | None = None) -> Timeline:
    """The audio of `chapters` (indices; default all) from each line's kept take."""
    missing = [c for c in cues if (chapters is None or c.chapter in chapters) and project.kept(c.key) is None]
    if missing:
        raise ExportError(f"{len(missing)} line(s) have no take yet (the first is on line "
                          f"{missing[0].line.number}): render them first.")
    settings, rate = project.settings, SAMPLE_RATE
    by_line = iter(cues)
    pieces: list[np.ndarray] = []
    marks: list[ChapterMark] = []
    subtitles: list[tuple[float, float, str]] = []
    clock = 0  # samples
    for index, chapter in enumerate(script.chapters):
        wanted = chapters is None or index in chapters
        chapter_start, after_pause = clock, True
        for item in chapter.items:
            if isinstance(item, Line):
                cue = next(by_line)
                if not wanted:
                    continue
                if not after_pause:
                    gap = settings.paragraph_gap_s if item.paragraph else settings.line_gap_s
                    pieces.append(_silence(gap, rate))
                    clock += len(pieces[-1])
                take = project.audio(project.kept(cue.key))
                subtitles.append((clock / rate, (clock + len(take)) / rate, item.text))
                pieces.append(take)
                clock += len(take)
                after_pause = False
            elif wanted and isinstance(item, Pause):
                pieces.append(_silence(item.seconds, rate))
                clock += len(pieces[-1])
                after_pause = True
        if wanted and clock > chapter_start:
            pieces.append(_silence(settings.chapter_gap_s, rate))
            clock += len(pieces[-1])
            marks.append(ChapterMark(chapter.title or project.name, chapter_start / rate, clock / rate))
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    return Timeline(audio.astype(np.float32), rate, marks, subtitles)


def _silence(seconds: float, rate: int) -> np.ndarray:
    return np.zeros(round(seconds * rate), np.float32)


def write_srt(path: Path, subtitles: list[tuple[float, float, str]]) -> Path:
    cues = [srt.Subtitle(i + 1, timedelta(seconds=start), timedelta(seconds=end), text)
            for i, (start, end, text) in enumerate(subtitles)]
    path.write_text(srt.compose(cues), encoding="utf-8")
    return path


def export(project: Project, script: Script, cues: list[Cue], out: Path, per_chapter: bool = False) -> list[Path]:
    """Write `out` (or one file per chapter beside it, numbered) and an SRT beside each; returns the audio files."""
    out = Path(out)
    if out.suffix.lower() not in SUFFIXES:
        raise ExportError(f"Export to {', '.join(SUFFIXES)}, not {out.suffix or 'a name without a suffix'}.")
    settings = project.settings
    groups = ([[i] for i, c in enumerate(script.chapters) if c.lines] if per_chapter else [None])
    written = []
    for number, group in enumerate(groups, 1):
        timeline = assemble(project, script, cues, group)
        target = out
        if group is not None:
            title = script.chapters[group[0]].title or project.name
            target = out.with_name(f"{out.stem}-{number:02d}-{_file_part(title)}{out.suffix}")
        audio = normalize_loudness(timeline.audio, SAMPLE_RATE, settings.loudness_lufs, settings.true_peak_db)
        write_file(audio, SAMPLE_RATE, target, title=project.name, chapters=timeline.chapters)
        write_srt(target.with_suffix(".srt"), timeline.subtitles)
        written.append(target)
    return written


def _file_part(title: str) -> str:
    return re.sub(r"[^\w-]+", "-", title).strip("-")[:40] or "chapter"
