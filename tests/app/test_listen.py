"""Where the app listens: a port in use is one line naming it (exit 2), and a start never depends on the page
answering Gradio's last localhost check within 3 s (it failed 3 of 11 starts on a loaded machine)."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gradio_client import Client

from app.listen import port_refusal

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def taken_port():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("command, advice", [
    (["--no-browser"], ", or leave --port out to take the first free one from 7860."),
    (["serve"], "."),  # serve's ports are fixed: leaving --port out takes the same one
    (["serve", "--wyoming"], "."),
])
def test_a_port_in_use_is_one_line_naming_it(tmp_path, taken_port, command, advice):
    done = subprocess.run([sys.executable, "launcher.py", *command, "--demo", "--port", str(taken_port)],
                          cwd=ROOT, env={**os.environ, "VOICEDESK_HOME": str(tmp_path)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"error: Port {taken_port} is already in use (another VoiceDesk, or another program): choose another with "
        f"--port{advice}"]


def test_what_else_stops_listening_is_named(taken_port):
    assert port_refusal("0.0.0.0", taken_port).startswith(f"Port {taken_port} is already in use")
    assert port_refusal("127.0.0.1", 70000) == "--port 70000 is not a port number (1-65535)."
    assert port_refusal("nohost.invalid", 8000) == "--host nohost.invalid is not an address of this computer."
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert port_refusal("127.0.0.1", port) is None


def test_the_app_starts_when_the_page_answers_gradios_check_late(tmp_path, app_launcher):
    """Gradio's url_ok gives up on the first HEAD that takes over 3 s; here it always fails."""
    runner = tmp_path / "slow_page.py"
    runner.write_text("import runpy, sys\n"
                      "import gradio.networking\n"
                      "gradio.networking.url_ok = lambda url: False  # what one slow answer on a loaded machine does\n"
                      "sys.argv = sys.argv[2:]  # [python, launcher.py, ...] as the launcher's own\n"
                      "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    (tmp_path / "home").mkdir()
    with app_launcher(tmp_path / "home", prefix=(sys.executable, str(runner))) as app:
        assert Client(app.url, verbose=False).predict(api_name="/model_status")["ready"]
        log = app.log.read_text()
    assert "Traceback" not in log and "localhost is not accessible" not in log


def test_a_port_a_closed_connection_lingers_on_is_free():
    """After the app stops, its port holds TIME_WAIT connections for a minute: starting again must work."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server side closes first: its end of the connection waits (TIME_WAIT)
        client.close()
    assert port_refusal("127.0.0.1", port) is None
