"""A Studio project on disk: the script as typed, its settings, and every line's takes.

    studio/<slug>/project.json        name, dates, script text, settings, per line: its takes and the kept one
                  takes/<id>.flac     a take's audio, named by a hash of its samples (each take stored once)
                  voices/<hash>/      the voice a designed or automatic speaker keeps (its first rendered line),
                                      named by the first 16 hex digits of the SHA-256 of the speaker's name

project.json is rewritten atomically after every take, so a crash or Stop loses at most the line being
rendered, and reopening the project resumes where it stopped. A line is known by a key made of what
decides its sound (voice, text, options), so takes survive edits elsewhere in the script.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import threading
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import soundfile as sf

from engine.audio.pcm import to_int16
from engine.errors import VoiceDeskError
from engine.voice import Voice

from ..library import clean_name, free_folder, slugify
from ..storage import atomic_write_json, read_json, write_audio

PROJECT_FILE = "project.json"
FORMAT, VERSION = "voicedesk-studio", 1


class ProjectError(VoiceDeskError):
    """An unknown, unreadable or unusable project."""


@dataclass
class ProjectSettings:
    """How a project renders and exports; every field has a default a person never needs to change."""

    narrator: str | None = None  # saved voice for lines without a name; None: a voice the model picks
    language: str | None = None  # None: detected by the model
    steps: int = 32  # diffusion steps per line (fewer: faster, rougher)
    line_gap_s: float = 0.3  # silence between lines
    paragraph_gap_s: float = 0.8  # ... where a blank line separates them
    chapter_gap_s: float = 2.0  # ... at the end of each chapter
    loudness_lufs: float = -18.0  # export target, EBU R128 integrated loudness
    true_peak_db: float = -2.0

    @classmethod
    def from_json(cls, value: dict | None) -> ProjectSettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (value or {}).items() if k in known})


@dataclass(frozen=True)
class Take:
    id: str
    seed: int
    seconds: float
    render_s: float  # how long it took to generate (for the RTF and the time left)
    created: str
    checks: dict | None = None  # the take checks' verdict (engine/checks), when checks were on


@dataclass
class LineTakes:
    takes: list[Take] = field(default_factory=list)
    chosen: str | None = None

    def kept(self) -> Take | None:
        return next((t for t in self.takes if t.id == self.chosen), None)


def line_key(voice: str, text: str, options: dict, occurrence: int) -> str:
    """What decides a line's sound, hashed: `voice` names the resolved voice, `occurrence` tells repeats apart."""
    blob = repr((voice, text, sorted(options.items()), occurrence)).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


class Project:
    def __init__(self, folder: Path, data: dict):
        self.folder = folder
        self._lock = threading.RLock()  # the render thread and the UI both update it
        self._load(data)

    def _load(self, data: dict) -> None:
        with self._lock:
            self.name: str = data["name"]
            self.created: str = data.get("created", "")
            self.script: str = data.get("script", "")
            self.settings = ProjectSettings.from_json(data.get("settings"))
            self.lines: dict[str, LineTakes] = {
                key: LineTakes([Take(**t) for t in value.get("takes", [])], value.get("chosen"))
                for key, value in data.get("lines", {}).items()}
            self.stamp = _stamp(self.folder / PROJECT_FILE)

    @property
    def slug(self) -> str:
        return self.folder.name

    @property
    def takes_dir(self) -> Path:
        return self.folder / "takes"

    # -- reading --------------------------------------------------------------------------------
    def kept(self, key: str) -> Take | None:
        with self._lock:
            state = self.lines.get(key)
            return state.kept() if state else None

    def rendered(self) -> set[str]:
        """The keys of the lines that have a kept take."""
        with self._lock:
            return {key for key, state in self.lines.items() if state.kept() is not None}

    def takes(self, key: str) -> list[Take]:
        with self._lock:
            return list(self.lines[key].takes) if key in self.lines else []

    def audio(self, take: Take) -> np.ndarray:
        """A take's samples, float32 at the file's rate (the engine's)."""
        samples, _rate = sf.read(self.take_path(take), dtype="float32")
        return samples

    def take_path(self, take: Take) -> Path:
        return self.takes_dir / f"{take.id}.flac"

    # -- writing --------------------------------------------------------------------------------
    def set_script(self, text: str, keep: set[str] | None = None) -> None:
        """Store the script; with `keep` (the keys of its lines), takes of lines no longer in it are removed."""
        with self._lock:
            self.script = text
            if keep is not None:
                self.lines = {k: v for k, v in self.lines.items() if k in keep}
            self.save()
            if keep is not None:
                self._remove_unused_audio()

    def update_settings(self, **changes) -> None:
        with self._lock:
            self.settings = ProjectSettings.from_json({**asdict(self.settings), **changes})
            self.save()

    def add_take(self, key: str, audio: np.ndarray, rate: int, seed: int, render_s: float,
                 checks: dict | None = None) -> Take:
        """Store a new take of a line (the audio first, then the project) and keep it."""
        pcm16 = to_int16(audio)
        take_id = hashlib.sha256(pcm16.tobytes()).hexdigest()[:20]
        take = Take(take_id, int(seed), round(len(pcm16) / rate, 3), round(render_s, 4), _now(), checks)
        self.takes_dir.mkdir(parents=True, exist_ok=True)
        if not self.take_path(take).is_file():  # the same samples are stored once
            write_audio(self.take_path(take), pcm16, rate)
        with self._lock:
            state = self.lines.setdefault(key, LineTakes())
            state.takes = [t for t in state.takes if t.id != take.id] + [take]
            state.chosen = take.id
            self.save()
        return take

    def choose(self, key: str, take_id: str) -> None:
        with self._lock:
            state = self.lines.get(key)
            if state is None or all(t.id != take_id for t in state.takes):
                raise ProjectError("That take is not part of this line any more.")
            state.chosen = take_id
            self.save()

    def save(self) -> None:
        with self._lock:
            data = {"format": FORMAT, "version": VERSION, "name": self.name, "created": self.created,
                    "updated": _now(), "script": self.script, "settings": asdict(self.settings),
                    "lines": {k: {"takes": [asdict(t) for t in v.takes], "chosen": v.chosen}
                              for k, v in self.lines.items()}}
            atomic_write_json(self.folder / PROJECT_FILE, data)
            self.stamp = _stamp(self.folder / PROJECT_FILE)

    def _remove_unused_audio(self) -> None:
        used = {t.id for state in self.lines.values() for t in state.takes}
        for path in self.takes_dir.glob("*.flac"):
            if path.stem not in used:
                path.unlink(missing_ok=True)

    # -- voices of designed and automatic speakers ------------------------------------------------
    def voice(self, name: str) -> Voice | None:
        folder = self._voice_folder(name)
        return Voice.load(folder) if folder.is_dir() else None

    def keep_voice(self, name: str, voice: Voice) -> None:
        voice.save(self._voice_folder(name))

    def _voice_folder(self, name: str) -> Path:
        return self.folder / "voices" / hashlib.sha256(name.encode()).hexdigest()[:16]


class Projects:
    """The folder of projects: list, create, open, delete.

    A project is one object in the process: a retake and Render all each wrote their own copy of the project,
    and the one saved last dropped the other's takes."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._open: dict[str, Project] = {}
        self._lock = threading.Lock()

    def names(self) -> list[tuple[str, str]]:
        """(name, slug) of each readable project, newest first."""
        found = []
        for folder in self.root.iterdir():
            data = read_json(folder / PROJECT_FILE) if folder.is_dir() else None
            if data is not None and data.get("format") == FORMAT and isinstance(data.get("name"), str):
                found.append((data.get("updated", ""), data["name"], folder.name))
        return [(name, slug) for _updated, name, slug in sorted(found, reverse=True)]

    def create(self, name: str, script: str = "") -> Project:
        """A new project called `name`; raises ProjectError when one has that name (the list would show both alike,
        and the command line would resume only one of them)."""
        name = clean_name(name, what="project")
        if any(existing == name for existing, _slug in self.names()):
            raise ProjectError(f"A project named '{name}' already exists: open it in the list, or give the new one "
                               "another name.")
        folder = free_folder(self.root, slugify(name))
        folder.mkdir(mode=0o700)
        project = Project(folder, {"name": name, "created": _now(), "script": script})
        project.save()
        with self._lock:
            self._open[folder.name] = project
        return project

    def open(self, slug: str) -> Project:
        """The project `slug`: the one object this process has for it, read again if another process saved it."""
        folder = self.root / str(slug)
        with self._lock:
            known = self._open.get(folder.name) if folder.parent == self.root else None
            if known is not None and known.stamp == _stamp(folder / PROJECT_FILE):
                return known
            data = self._read(folder, slug)
            try:
                if known is not None:  # saved by another process (voicedesk render) since
                    known._load(data)
                    return known
                for stale in [*folder.glob(".*.tmp"), *(folder / "takes").glob(".*.tmp")]:  # cut short by a crash
                    stale.unlink(missing_ok=True)  # (only on the first open: later, a write may be under way)
                project = self._open[folder.name] = Project(folder, data)
                return project
            except (KeyError, TypeError) as err:
                raise ProjectError(f"The project '{slug}' cannot be read ({err}).") from err

    def _read(self, folder: Path, slug: str) -> dict:
        data = read_json(folder / PROJECT_FILE) if folder.parent == self.root and folder.is_dir() else None
        if data is None or data.get("format") != FORMAT:
            raise ProjectError(f"There is no readable project '{slug}'.")
        if data.get("version") != VERSION:
            raise ProjectError(f"The project '{data.get('name', slug)}' was saved by another version of VoiceDesk.")
        return data

    def open_or_create(self, name: str) -> Project:
        """The project called `name` (the command line keeps one per script), made when missing."""
        for existing, slug in self.names():
            if existing == clean_name(name, what="project"):
                return self.open(slug)
        return self.create(name)

    def delete(self, slug: str) -> None:
        shutil.rmtree(self.open(slug).folder)
        with self._lock:
            self._open.pop(str(slug), None)


def _stamp(path: Path) -> tuple[int, int] | None:
    """Which version of project.json is on disk (each save renames a new file into place)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
