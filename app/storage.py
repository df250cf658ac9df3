"""Where VoiceDesk keeps its files, and how it writes them so a crash never leaves half a file.

Folders are the one root in `engine.folders` (platformdirs, or `VOICEDESK_HOME`). Nothing is ever
written inside the installed package.
"""
from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from engine.fileio import atomic_write, atomic_write_text, saving_in
from engine.folders import user_folders

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppDirs:
    """The app's folders. `data` holds what the user made (voices, history); `cache` only what can be rebuilt."""

    config: Path
    data: Path
    cache: Path

    @property
    def voices(self) -> Path:
        return self.data / "voices"

    @property
    def history(self) -> Path:
        return self.data / "history"

    @property
    def studio(self) -> Path:
        """The Studio's projects (scripts and their takes)."""
        return self.data / "studio"

    @property
    def exports(self) -> Path:
        return self.cache / "exports"

    @property
    def uploads(self) -> Path:
        """Gradio's upload/stream cache: kept in our private cache, not in the world-readable /tmp."""
        return self.cache / "gradio"

    @property
    def settings_file(self) -> Path:
        return self.config / "settings.json"

    @classmethod
    def default(cls) -> AppDirs:
        folders = user_folders()
        return cls(config=folders.config, data=folders.data, cache=folders.cache)

    def create(self) -> AppDirs:
        """Make the folders; raises StorageError (disk full, read-only) naming the one that failed."""
        for folder in (self.config, self.data, self.cache, self.voices, self.history, self.studio, self.exports,
                       self.uploads):
            with saving_in(folder):
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # 0o700: voice clips are personal data
        return self


def write_audio(path: Path, audio: np.ndarray, sample_rate: int) -> None:
    """Write 16-bit audio atomically; the format (WAV or FLAC) follows the file's suffix."""
    fmt = {".wav": "WAV", ".flac": "FLAC"}[path.suffix.lower()]
    atomic_write(path, lambda tmp: sf.write(tmp, audio, sample_rate, format=fmt, subtype="PCM_16"))


def audio_bytes(audio: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """16-bit audio as the bytes of a WAV or FLAC file, made in memory (nothing is written)."""
    buffer = io.BytesIO()
    sf.write(buffer, audio, sample_rate, format=fmt, subtype="PCM_16")
    return buffer.getvalue()


def atomic_write_json(path: Path, value) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> dict | None:
    """The JSON object in `path`, or None (with a warning) when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        log.warning("skipping %s: file is missing", path)
        return None
    except (OSError, ValueError, RecursionError) as err:  # not UTF-8, not JSON, too deep, a 5000-digit integer
        log.warning("skipping %s: cannot read it (%s)", path, err)
        return None
    if not isinstance(value, dict):
        log.warning("skipping %s: expected a JSON object", path)
        return None
    return value
