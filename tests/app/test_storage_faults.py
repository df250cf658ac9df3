"""A full disk or a read-only folder, for real: the app's folders on a tiny (or read-only) tmpfs
mounted in a user + mount namespace (`unshare -rm`, no root needed where the kernel allows it).
Every failure says "disk full" or "read-only" with the folder, and the app keeps serving."""
import os
import subprocess
import sys
from pathlib import Path

import httpx
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
                client.predict(text=text, **FAST, live_id="", api_name="/design")
        message = str(failed.value)
        assert "The disk is full" in message and str(data) in message, message
        assert "LibsndfileError" not in message and "Errno" not in message
        assert client.predict(api_name="/model_status")["ready"]  # still serving
        with pytest.raises(AppError, match="The disk is full"):  # and saying so again, not crashing
            client.predict(text=text, **FAST, live_id="", api_name="/design")


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


def upload(url: str, name: str, data: bytes) -> httpx.Response:
    return httpx.post(f"{url}/gradio_api/upload", files={"files": (name, data, "audio/wav")}, timeout=60)


def test_an_upload_onto_a_full_disk_says_so_and_loses_nothing(tmp_path, app_launcher, reference_wav):
    uploads = tmp_path / "cache" / "gradio"  # Gradio's upload folder lives in the app's cache
    with app_launcher(tmp_path, prefix=on_tmpfs(tmp_path / "cache", "size=2m")) as app:
        kept = upload(app.url, "reference.wav", reference_wav.read_bytes())
        assert kept.status_code == 200, kept.text
        kept_path = kept.json()[0]
        seen_by_app = Path(f"/proc/{app.proc.pid}/root{uploads}")  # the tmpfs, as the app's namespace sees it
        before = sorted(seen_by_app.rglob("*"))

        refused = upload(app.url, "long.wav", os.urandom(3 * 2**20))  # more than the whole disk
        assert refused.status_code == 507, (refused.status_code, refused.text)
        assert refused.text.startswith("The disk is full: nothing more can be saved in")
        assert str(uploads) in refused.text
        assert "Errno" not in refused.text and "Internal Server Error" not in refused.text

        client = Client(app.url, verbose=False)
        assert client.predict(api_name="/model_status")["ready"]  # still serving
        # Nothing lost, nothing left: the clip uploaded before is whole, the refused one left no part behind
        # (the folder holds what it held before, and a new upload fits again).
        assert sorted(seen_by_app.rglob("*")) == before
        served = httpx.get(f"{app.url}/gradio_api/file={kept_path}", timeout=60)
        assert served.status_code == 200 and served.content == reference_wav.read_bytes()
        again = upload(app.url, "short.wav", os.urandom(2**20))
        assert again.status_code == 200, again.text


def test_a_render_onto_a_full_disk_stops_once_and_resumes(tmp_path):
    """`voicedesk render` generated every remaining line and printed 'The disk is full' for each."""
    data = tmp_path / "data"
    script = tmp_path / "book.md"
    script.write_text("".join(f"The narrator reads line number {i} of the book.\n" for i in range(1, 9)),
                      encoding="utf-8")
    run = subprocess.run([*on_tmpfs(data, "size=200k"), sys.executable, "launcher.py", "render", str(script), "--out",
                          str(tmp_path / "book.wav"), "--demo", "--device", "cpu", "--steps", "4"], cwd=ROOT,
                         env={**os.environ, "VOICEDESK_HOME": str(tmp_path)}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stderr.count("The disk is full") == 1 and "failed" not in run.stderr, run.stderr[-3000:]
    assert "The render stopped at line" in run.stderr and "running the same command again goes on" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "book.wav").exists()
