"""History of generations: each result as a WAV file plus one JSON line of metadata, newest last.

    history/index.jsonl        one object per line: id, created, text, voice, mode, backend, rtf, ...
    history/audio/<id>.wav     the lossless result

The oldest entries are removed once there are more than `max_entries` or their audio exceeds
`max_bytes`. A line that cannot be parsed (say, cut short by a crash) is skipped with a warning.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import VoiceDeskError

from .storage import atomic_write_text, write_audio

log = logging.getLogger("voicedesk")

INDEX_FILE = "index.jsonl"
_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")


class HistoryError(VoiceDeskError):
    """An unknown or unreadable history entry."""


@dataclass(frozen=True)
class HistoryEntry:
    id: str
    created: str  # ISO 8601, UTC
    text: str
    audio: Path
    meta: dict = field(default_factory=dict)  # voice, mode, backend, rtf, first_audio_s, audio_s, seed, ...

    def to_json(self) -> dict:
        return {"id": self.id, "created": self.created, "text": self.text, **self.meta}


class History:
    def __init__(self, root: Path, max_entries: int = 200, max_bytes: int = 500 * 2**20):
        self.root = Path(root)
        self.audio_dir = self.root / "audio"
        self.audio_dir.mkdir(parents=True, exist_ok=True)
        self.index = self.root / INDEX_FILE
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._lock = threading.Lock()  # sessions finish generations on different threads

    def add(self, audio: np.ndarray, sample_rate: int, text: str, **meta) -> HistoryEntry:
        """Store a result, then drop the oldest entries beyond the caps."""
        now = dt.datetime.now(dt.timezone.utc)
        entry_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
        path = self.audio_dir / f"{entry_id}.wav"
        write_audio(path, audio, sample_rate)
        entry = HistoryEntry(entry_id, now.isoformat(timespec="seconds"), text, path, meta)
        with self._lock:
            with self.index.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry.to_json(), ensure_ascii=False) + "\n")
            self._enforce_caps()
        return entry

    def entries(self) -> list[HistoryEntry]:
        """All readable entries, oldest first."""
        if not self.index.exists():
            return []
        found = []
        for number, line in enumerate(self.index.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            entry = self._parse(line, number)
            if entry is not None:
                found.append(entry)
        return found

    def get(self, entry_id: str) -> HistoryEntry:
        for entry in self.entries():
            if entry.id == entry_id:
                return entry
        raise HistoryError(f"There is no history entry '{entry_id}'.")

    def delete(self, entry_id: str) -> None:
        with self._lock:
            entry = self.get(entry_id)
            self._rewrite([e for e in self.entries() if e.id != entry.id])
            entry.audio.unlink(missing_ok=True)

    def _parse(self, line: str, number: int) -> HistoryEntry | None:
        try:
            record = json.loads(line)
            entry_id = record.pop("id")
            created, text = record.pop("created"), record.pop("text")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            log.warning("history: skipping unreadable line %d of %s", number, self.index)
            return None
        if not isinstance(entry_id, str) or not _ID.match(entry_id):
            log.warning("history: skipping line %d of %s (bad id)", number, self.index)
            return None
        audio = self.audio_dir / f"{entry_id}.wav"
        if not audio.is_file():
            log.warning("history: skipping %s, its audio file is missing", entry_id)
            return None
        return HistoryEntry(entry_id, str(created), str(text), audio, record)

    def _enforce_caps(self) -> None:
        entries = self.entries()
        sizes = [e.audio.stat().st_size for e in entries]
        drop = max(0, len(entries) - self.max_entries)
        while drop < len(entries) - 1 and sum(sizes[drop:]) > self.max_bytes:  # always keep the newest
            drop += 1
        if drop:
            self._rewrite(entries[drop:])
            for old in entries[:drop]:
                old.audio.unlink(missing_ok=True)

    def _rewrite(self, keep: list[HistoryEntry]) -> None:
        atomic_write_text(self.index, "".join(json.dumps(e.to_json(), ensure_ascii=False) + "\n" for e in keep))
