"""A `launcher.py serve ...` of the tests' own, in a temporary VOICEDESK_HOME with one saved voice (random tokens,
which the demo model takes as well as any), stopped afterwards: for tests that speak to it as a client would."""
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from app.library import VoiceLibrary
from app.storage import AppDirs
from engine.voice import Voice

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 300
# The environment that hides every GPU from a launched app: the tests that launch one compare its audio with the CPU's
# eager reference and pace themselves by the demo model's CPU speed (on a GPU it answers before they can watch it work)
CPU_ONLY = {"CUDA_VISIBLE_DEVICES": ""}


@contextlib.contextmanager
def serving(home: Path, args: list[str], ready: Callable[[int, str], bool], voice: str | None = None,
            settings: str = "{}", env: dict[str, str] | None = None):
    """Start `launcher.py serve --port P *args` on the CPU (CPU_ONLY) with `settings` (JSON), the saved voice `voice`
    (if any) and `env` added to the environment; yield (port, dirs, process, log file) once `ready(port, log text)`."""
    dirs = AppDirs(config=home / "config", data=home / "data", cache=home / "cache").create()  # as VOICEDESK_HOME
    dirs.settings_file.write_text(settings)
    if voice is not None:
        tokens = torch.randint(0, 1024, (8, 50), generator=torch.Generator().manual_seed(0))
        VoiceLibrary.open(dirs).save(voice, Voice(tokens=tokens, transcript="This is how I sound.", rms=0.08))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = home / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "launcher.py", "serve", "--port", str(port), *args], cwd=ROOT,
                                env={**os.environ, "VOICEDESK_HOME": str(home), **CPU_ONLY, **(env or {})}, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready(port, log.read_text()):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        yield port, dirs, proc, log
    finally:
        proc.terminate()
        proc.wait(30)
