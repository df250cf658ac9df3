"""User settings in one JSON file that the app and the command line both read."""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .storage import atomic_write_json, read_json

log = logging.getLogger("voicedesk")


@dataclass
class Settings:
    mode: str = "hifi"  # hifi | realtime | eager
    language: str = "auto"  # a language id, or "auto"
    last_voice: str | None = None  # folder name of a saved voice
    play_on_speakers: bool = False
    output_device: str | None = None  # None: the system's default output
    steps: int = 32
    guidance: float = 2.0
    denoise: bool = True
    preprocess: bool = True
    postprocess: bool = True
    history_max_entries: int = 200
    history_max_mb: int = 500

    @classmethod
    def load(cls, path: Path) -> Settings:
        """Settings from `path`; a missing file gives the defaults, a bad value its default (with a warning)."""
        if not path.exists():
            return cls()
        stored = read_json(path) or {}
        settings = cls()
        for f in fields(cls):
            if f.name not in stored:
                continue
            value, default = stored[f.name], getattr(settings, f.name)
            if _same_kind(value, default):
                setattr(settings, f.name, float(value) if isinstance(default, float) else value)
            else:
                log.warning("settings: ignoring %s=%r in %s (expected %s)", f.name, value, path,
                            type(default).__name__)
        return settings

    def save(self, path: Path) -> None:
        atomic_write_json(path, asdict(self))

    def updated(self, path: Path, **changes) -> Settings:
        """Apply `changes`, save, return self (unknown names raise TypeError)."""
        known = {f.name for f in fields(self)}
        if set(changes) - known:
            raise TypeError(f"unknown settings: {sorted(set(changes) - known)}")
        for name, value in changes.items():
            setattr(self, name, value)
        self.save(path)
        return self


def _same_kind(value, default) -> bool:
    if default is None:  # optional strings
        return value is None or isinstance(value, str)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, type(default))
