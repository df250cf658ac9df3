"""Ctrl+C (SIGINT) ends a command as a person expects, without a traceback: `serve` (the API) stops and exits 0,
as the app and `serve --wyoming` do; `synth` stops mid-generation, writes nothing and exits 130, as `render` does.
Each is launched as a user runs it and interrupted once it is known to be where the test wants it (its line
printed; synth's generation held until the interrupt), never after a wait."""
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from served import CPU_ONLY

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 300  # generous: only ends a broken test
# synth as launched, its generation held until it is interrupted: the interrupt always finds it generating
HELD_SYNTH = """
import runpy, sys, threading
from engine.engine import Engine
def held(self, *args, **kwargs):
    print("generating", flush=True)
    threading.Event().wait()
Engine.synthesize = held
sys.argv = ["launcher.py", *sys.argv[1:]]
runpy.run_path("launcher.py", run_name="__main__")
"""


def interrupted(command: list[str], home: Path, line: str) -> subprocess.CompletedProcess:
    """Run `command` in the checkout, send SIGINT once it prints `line`, and return how it ended."""
    proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "VOICEDESK_HOME": str(home), **CPU_ONLY},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = []
        for printed in proc.stdout:
            out.append(printed)
            if line in printed:
                proc.send_signal(signal.SIGINT)
                break
        rest, err = proc.communicate(timeout=WAIT_S)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(command, proc.returncode, "".join(out) + rest, err)


def test_ctrl_c_stops_the_api_server_cleanly(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = interrupted([sys.executable, "launcher.py", "serve", "--demo", "--port", str(port)], tmp_path,
                       "VoiceDesk API is running at")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]


def test_ctrl_c_stops_synth_and_writes_nothing(tmp_path):
    out = tmp_path / "hello.wav"
    done = interrupted([sys.executable, "-c", HELD_SYNTH, "synth", "--demo", "--text", "Hello there.", "--out",
                        str(out)], tmp_path, "generating")
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == "Stopped: nothing was written." and not out.exists()

