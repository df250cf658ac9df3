"""History of generations: each result as a WAV file plus one JSON line of metadata, newest last.

    history/index.jsonl        one object per line: id, created, text, voice, mode, backend, rtf, ...
    history/audio/<id>.wav     the lossless result

The oldest entries are removed once there are more than `max_entries` or their audio exceeds
`max_bytes`. A line that cannot be parsed is skipped with a warning. A crash can leave a last line
without its newline (cut off before the next append, which would otherwise be glued onto it), a WAV
that no line names, or a temporary file: opening the history removes them.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
import secrets
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.errors import VoiceDeskError
from engine.fileio import saving_in
from engine.text.clean import encodable

from .storage import atomic_write_text, write_audio

log = logging.getLogger(__name__)

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
        self._remove_leftovers()

    def add(self, audio: np.ndarray, sample_rate: int, text: str, **meta) -> HistoryEntry:
        """Store a result, then drop the oldest entries beyond the caps."""
        now = dt.datetime.now(dt.timezone.utc)
        entry_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
        path = self.audio_dir / f"{entry_id}.wav"
        write_audio(path, audio, sample_rate)
        entry = HistoryEntry(entry_id, now.isoformat(timespec="seconds"), encodable(text), path, meta)
        with self._lock:
            self._append(json.dumps(entry.to_json(), ensure_ascii=False) + "\n")
            self._enforce_caps()
        return entry

    def update(self, entry_id: str, **meta) -> None:
        """Add to an entry's metadata (a figure measured after it was stored); a deleted entry stays deleted."""
        with self._lock:
            entries = self.entries()
            if any(e.id == entry_id for e in entries):
                self._rewrite([replace(e, meta={**e.meta, **meta}) if e.id == entry_id else e for e in entries])

    def _append(self, line: str) -> None:
        with saving_in(self.root), self.index.open("ab+") as f:
            size = f.seek(0, 2)
            if size and (f.seek(size - 1), f.read(1))[1] != b"\n":
                f.seek(0)
                whole_lines = f.read().rfind(b"\n") + 1
                log.warning("history: removing a line cut short by a crash (%d bytes) from %s",
                            size - whole_lines, self.index)
                f.truncate(whole_lines)
            f.write(line.encode("utf-8"))

    def _remove_leftovers(self) -> None:
        """Temporary files and WAVs that no index line names: what a crash mid-save leaves."""
        for tmp in [*self.root.glob(".*.tmp"), *self.audio_dir.glob(".*.tmp")]:
            tmp.unlink(missing_ok=True)
        named = {entry.id for entry in self.entries()}
        for wav in self.audio_dir.glob("*.wav"):
            if wav.stem not in named:
                log.warning("history: removing %s, left by a crash before it was listed", wav)
                wav.unlink(missing_ok=True)

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
