"""A full disk or a read-only folder, for real: the app's folders on a tiny (or read-only) tmpfs
mounted in a user + mount namespace (`unshare -rm`, no root needed where the kernel allows it).
Every failure says "disk full" or "read-only" with the folder, and the app keeps serving."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

ROOT = Path(__file__).resolve().parents[2]
FAST = {"steps": 4, "randomize": False, "seed": 3}


def _namespaces_work() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="needs unprivileged user and mount namespaces")


def on_tmpfs(folder: Path, options: str) -> tuple[str, ...]:
    """A command prefix that mounts a tmpfs with `options` on `folder`, then runs the command."""
    folder.mkdir(parents=True, exist_ok=True)
    return ("unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o {options} none "{folder}" && exec "$@"', "sh")


def test_a_full_disk_is_named_and_the_app_keeps_serving(tmp_path, app_launcher):
    data = tmp_path / "data"
    with app_launcher(tmp_path, prefix=on_tmpfs(data, "size=1500k")) as app:
        client = Client(app.url, verbose=False)
        text = "A sentence that fills the small disk a little more with every take. " * 3
        with pytest.raises(AppError) as failed:
            for _ in range(40):  # each result is a WAV of a few hundred kB
                client.predict(text=text, **FAST, api_name="/design")
        message = str(failed.value)
        assert "The disk is full" in message and str(data) in message, message
        assert "LibsndfileError" not in message and "Errno" not in message
        assert client.predict(api_name="/model_status")["ready"]  # still serving
        with pytest.raises(AppError, match="The disk is full"):  # and saying so again, not crashing
            client.predict(text=text, **FAST, api_name="/design")


def test_a_data_folder_that_cannot_be_made_is_one_line_at_startup(tmp_path):
    data = tmp_path / "data"
    run = subprocess.run([*on_tmpfs(data, "ro"), sys.executable, "launcher.py", "--demo", "--no-browser"],
                         cwd=ROOT, env={**os.environ, "VOICEDESK_HOME": str(tmp_path)}, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines[-1] == (f"error: The folder {data / 'voices'} is read-only: nothing can be saved there. Make it "
                         "writable (or set VOICEDESK_HOME to a folder you can write), then try again.")
    assert "Traceback" not in run.stderr
