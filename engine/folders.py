"""The one root of everything VoiceDesk keeps on disk: the platform's folders for "VoiceDesk"
(platformdirs), or all of them under `$VOICEDESK_HOME` (portable installs, tests). The app's library,
history and settings and the engine's caches (quantized models, compiled kernels) all live below it."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "VoiceDesk"
HOME_ENV = "VOICEDESK_HOME"


@dataclass(frozen=True)
class Folders:
    config: Path
    data: Path  # what the user made (voices, history)
    cache: Path  # only what can be rebuilt


def user_folders() -> Folders:
    home = os.environ.get(HOME_ENV)
    if home:
        root = Path(home).expanduser().resolve()
        return Folders(config=root / "config", data=root / "data", cache=root / "cache")
    import platformdirs

    dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False)
    return Folders(config=Path(dirs.user_config_dir), data=Path(dirs.user_data_dir), cache=Path(dirs.user_cache_dir))
