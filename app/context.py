"""Everything the UI handlers share, built once by the server and passed to each tab."""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import AudioInputError
from engine.voice import Voice

from .api.access import ApiAccess
from .checks import CheckService
from .engine_host import EngineHost
from .history import History
from .library import VoiceLibrary
from .live import LiveStreams
from .playback import SpeakerStatus
from .settings import Settings
from .storage import AppDirs
from .studio.project import Projects
from .worker import GpuWorker

VOICE_CACHE_SIZE = 16


@dataclass
class AppContext:
    dirs: AppDirs
    settings: Settings
    library: VoiceLibrary
    history: History
    worker: GpuWorker
    host: EngineHost
    speakers: SpeakerStatus
    demo: bool
    upload_root: Path  # Gradio's upload folder: the only place reference clips may come from
    api: ApiAccess = field(default_factory=lambda: ApiAccess(key=None, forced_on=False))
    bind_host: str = "127.0.0.1"  # the address the server listens on
    notices: list[str] = field(default_factory=list)  # said once, on the next page that opens
    live: dict = field(default_factory=dict)  # session -> LiveMetrics of the generation its page runs last
    live_audio: LiveStreams = field(default_factory=LiveStreams)  # where the pages hear their generations
    settings_revision: int = 0  # counts saves, so open pages can tell they show old settings
    settings_changed: dict[str, int] = field(default_factory=dict)  # setting -> the revision that last saved it
    settings_watchers: list[Callable[[], Any]] = field(default_factory=list)  # called after each save, in order
    checks: CheckService = field(init=False)  # the take checks (docs/checks.md)
    _voices: OrderedDict = field(default_factory=OrderedDict)
    _voices_lock: threading.Lock = field(default_factory=threading.Lock)
    _notices_lock: threading.Lock = field(default_factory=threading.Lock)
    _settings_lock: threading.Lock = field(default_factory=threading.Lock)

    def take_notices(self) -> list[str]:
        """The startup notices not yet shown, emptied: each is shown on one page only."""
        with self._notices_lock:
            notices, self.notices = self.notices, []
        return notices

    def __post_init__(self):
        self.checks = CheckService(lambda: self.host.engine.device)
        # one Projects, so each project is one object that every handler updates (it reads the disk on each use)
        self.projects = Projects(self.dirs.studio)

    def save_settings(self, **changes) -> int:
        """Pages save concurrently (a mode switch and a Steps edit arrive together): one save at a time, so the
        file holds every change and each save gets its own revision for the other pages to notice; the watchers
        see the saves in the order they were made. Returns the revision this save made."""
        with self._settings_lock:
            self.settings.updated(self.dirs.settings_file, **changes)
            self.settings_revision += 1
            self.settings_changed.update(dict.fromkeys(changes, self.settings_revision))
            for watch in self.settings_watchers:
                watch()
            return self.settings_revision

    def voice_from_clip(self, path: str, transcript: str | None, preprocess: bool, owner: str | None,
                        show: Callable[[int], Any] = lambda place: place) -> Generator[Any, None, Voice]:
        """The Voice for a reference clip, made on the GPU worker once per (clip, transcript, preprocess):
        yields `show(place in line)` while the job waits (GpuWorker.result)."""
        clip = checked_upload(path, self.upload_root)
        key = (hashlib.sha1(clip.read_bytes()).hexdigest(), transcript or "", preprocess)
        with self._voices_lock:
            if key in self._voices:
                self._voices.move_to_end(key)
                return self._voices[key]
        engine = self.host.engine
        job = self.worker.submit(lambda cancel: engine.voice_from_clip(str(clip), transcript or None, preprocess),
                                 owner=owner)
        voice = yield from self.worker.result(job, show)
        with self._voices_lock:
            self._voices[key] = voice
            while len(self._voices) > VOICE_CACHE_SIZE:
                self._voices.popitem(last=False)
        return voice


def checked_upload(path: str | None, upload_root: Path) -> Path:
    """A reference clip must be a file that Gradio received, never a URL or a path elsewhere."""
    if not path:
        raise AudioInputError("Record or upload a reference clip first, or pick a saved voice.")
    clip = Path(path).resolve()
    if not clip.is_relative_to(upload_root.resolve()):
        raise AudioInputError("Only clips uploaded or recorded in the app are accepted.")
    if not clip.is_file():
        raise AudioInputError("The reference clip did not arrive: upload it again.")
    return clip
