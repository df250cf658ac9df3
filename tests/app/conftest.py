"""A real VoiceDesk app, launched as the user would (`python launcher.py --demo`), on the tiny
random checkpoint, with its folders in a temporary VOICEDESK_HOME. Shared by the API and browser
tests of one session."""
import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from pages import CHROMIUM
from served import CPU_ONLY
from sounds import buzz

from app.worker import GpuWorker

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 300


@dataclass
class RunningApp:
    url: str
    home: Path
    log: Path
    proc: subprocess.Popen

    def logs(self, line: str, *, since: int, timeout_s: float = 240) -> bool:
        """Whether the app logs `line` after the log's first `since` characters, waiting up to `timeout_s` for it
        (generous: a condition, not a time bound)."""
        deadline = time.monotonic() + timeout_s
        while line not in self.log.read_text()[since:]:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def worker():
    """A GPU worker of the test's own, shut down after it."""
    w = GpuWorker()
    yield w
    w.shutdown()


@pytest.fixture
def port() -> int:
    """A free loopback port for a server the test starts."""
    return free_port()


@contextlib.contextmanager
def launch_app(home: Path, prefix: tuple[str, ...] = (), until: str = "ready", api: bool = True, gpu: bool = False):
    """Run `launcher.py --demo` with its folders in `home` (behind `prefix`, a command such as unshare);
    yield once its model is `until` ("ready", or "answering": the API answers whatever the model does);
    stop it afterwards. Its terminal output goes to home/app.log. `api`: with the OpenAI-compatible API
    switched on (`--api`). The app runs on the CPU, as on a machine without a GPU (`served.CPU_ONLY`), unless
    `gpu`: then on what it finds."""
    from gradio_client import Client

    log = home / "app.log"
    port = free_port()
    env = {**os.environ, "VOICEDESK_HOME": str(home), **({} if gpu else CPU_ONLY)}
    with log.open("w") as out:
        proc = subprocess.Popen([*prefix, sys.executable, "launcher.py", "--demo", "--no-browser", "--port", str(port),
                                 *(["--api"] if api else [])], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the app exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the app did not become {until} in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            try:
                status = Client(url, verbose=False).predict(api_name="/model_status")
                if status["ready"] or until == "answering":
                    break
                assert status["stage"] != "failed", status
            except (httpx.HTTPError, OSError, ValueError):
                pass  # not listening yet
            time.sleep(1)
        yield RunningApp(url, home, log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def app_launcher():
    """`launch_app` for tests that need an app of their own (their own data folder or a fault)."""
    return launch_app


@pytest.fixture(scope="session")
def running_app(tmp_path_factory):
    with launch_app(tmp_path_factory.mktemp("voicedesk_home")) as app:
        yield app


@pytest.fixture(scope="session")
def decode_audio():
    """Decodes any audio file's bytes with the ffmpeg command line (a decoder the app does not use) to
    int16 mono at 24 kHz: `decode_audio(data, fmt) -> np.ndarray`; fmt "pcm" means raw s16le."""
    def decode(data: bytes, fmt: str) -> np.ndarray:
        source = ["-f", "s16le", "-ar", "24000", "-ac", "1"] if fmt == "pcm" else []
        out = subprocess.run(["ffmpeg", "-v", "error", *source, "-i", "pipe:0", "-f", "s16le", "-ac", "1",
                              "-ar", "24000", "pipe:1"], input=data, capture_output=True, check=True)
        return np.frombuffer(out.stdout, np.int16)
    return decode


@pytest.fixture(scope="session")
def buzz_wav(tmp_path_factory):
    """Writes a voiced, syllable-like sound (a 140 Hz buzz with a 4 Hz envelope) to a WAV file:
    `buzz_wav(name, seconds, rate, subtype=None) -> Path`."""
    def write(name: str, seconds: float, rate: int, subtype: str | None = None) -> Path:
        path = tmp_path_factory.mktemp("clips") / name
        sf.write(path, buzz(seconds, rate=rate), rate, subtype=subtype)
        return path
    return write


@pytest.fixture(scope="session")
def reference_wav(buzz_wav) -> Path:
    """4 s of the buzz at 24 kHz (float WAV)."""
    return buzz_wav("reference.wav", 4, 24000)


@pytest.fixture(scope="module")  # not longer: other modules may start Playwright themselves
def browser(buzz_wav):
    """Debian's Chromium, headless, driven by Playwright; its fake microphone loops 6 s of the buzz
    (48 kHz 16-bit)."""
    from playwright.sync_api import sync_playwright

    microphone = buzz_wav("mic.wav", 6, 48000, subtype="PCM_16")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic",
            "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
            f"--use-file-for-fake-audio-capture={microphone}", "--autoplay-policy=no-user-gesture-required"])
        yield browser
        browser.close()
