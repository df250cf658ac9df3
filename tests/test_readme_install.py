"""The README's install line on a machine without an NVIDIA GPU whose PyTorch CPU index cannot be reached: it says
so in one line and goes on, instead of pip printing about 50 'Retrying ...' warnings (pip is a stand-in here that
notes how it was called; the probe meets a proxy that refuses every connection)."""
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def install_line() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [line] = [line for line in re.findall(r"```bash\n(.*?)\n```", readme, re.S) if "nvidia-smi" in line]
    return line


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_an_unreachable_cpu_index_is_said_once_and_the_install_goes_on(tmp_path):
    line = install_line()
    assert line.startswith("python3 -m venv .venv && ")
    steps = line.removeprefix("python3 -m venv .venv && ")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "pip").write_text(f"#!/bin/sh\necho \"pip $*\" >> {tmp_path}/pip-calls\n")
    (venv / "voicedesk").write_text(f"#!/bin/sh\necho started >> {tmp_path}/pip-calls\n")
    for tool in ("pip", "voicedesk"):
        (venv / tool).chmod(0o755)
    bin_dir = tmp_path / "bin"  # the shell's tools, without nvidia-smi
    bin_dir.mkdir()
    for tool in ("echo", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    proxy = f"http://127.0.0.1:{closed_port()}"
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "https_proxy": proxy, "HTTPS_PROXY": proxy}
    done = subprocess.run([shutil.which("bash"), "-c", steps], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    said = "PyTorch's CPU index cannot be reached: torch comes from PyPI (the larger CUDA build)."
    assert done.stdout.strip() == said
    assert "Retrying" not in done.stdout + done.stderr and done.stderr == ""
    assert (tmp_path / "pip-calls").read_text().splitlines() == ["pip install .", "started"]
