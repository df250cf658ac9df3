"""The installed package works without the checkout: build the wheel (from a copy of the tracked files, so
nothing is written into the checkout), install it into a fresh virtual environment, and run the installed
`voicedesk` console script from an unrelated folder against the demo model it carries."""
import subprocess
import sys
import sysconfig
import time
import venv
from pathlib import Path

import httpx
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ folder of a fresh venv holding only the wheel (its dependencies are this environment's)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    files = run(["git", "ls-files", "-z"], cwd=ROOT).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():  # skip paths deleted in the working tree
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp / "dist"),
         str(source)])
    (wheel,) = (tmp / "dist").glob("voicedesk-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    # The dependencies come from this environment's site-packages as a plain path: its .pth files (the
    # editable install of the checkout among them) are not processed there.
    (purelib / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([env_dir / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)])
    return env_dir / "bin"


def test_installed_package_runs_from_anywhere(installed, tmp_path):
    python = installed / "python"
    where = run([python, "-c", "import app, engine, kernels, launcher; print(engine.__file__, app.ASSETS)"],
                cwd=tmp_path).stdout.split()
    assert all(not Path(p).is_relative_to(ROOT) for p in where), where  # not the checkout's files
    assert run([installed / "voicedesk", "--version"], cwd=tmp_path).stdout.startswith("voicedesk ")
    home = tmp_path / "home"
    run([installed / "voicedesk", "synth", "--demo", "--text", "Hello from the wheel.", "--steps", "2",
         "--out", "hello.wav"], cwd=tmp_path, env={"VOICEDESK_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert sf.info(tmp_path / "hello.wav").duration > 0.3


def test_installed_app_serves_the_demo(installed, tmp_path, port):
    log = tmp_path / "app.log"
    with log.open("w") as out:
        proc = subprocess.Popen([installed / "voicedesk", "--demo", "--no-browser", "--port", str(port)], cwd=tmp_path,
                                env={"VOICEDESK_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, f"the app exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no answer in 300 s:\n{log.read_text()[-3000:]}"
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                if page.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        assert "VoiceDesk" in page.text
        css = httpx.get(f"http://127.0.0.1:{port}/config", timeout=5).text
        assert ".vd-title" in css  # the stylesheet shipped as package data reached the page
    finally:
        proc.terminate()
        proc.wait(timeout=30)
