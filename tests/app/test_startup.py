"""Starting the launched app on a data folder that a person or a crash left in a bad state."""
import json
import shutil
import time
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def toasts_on_a_new_page(url: str) -> list[str]:
    """The notifications a freshly opened page shows once the model is ready."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                    "--disable-background-networking"])
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)
        page.wait_for_timeout(2000)  # page-load events have run
        texts = [t.inner_text() for t in page.get_by_test_id("toast-body").all()]
        browser.close()
    return texts


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is needed (apt-get install chromium)")
def test_settings_out_of_range_are_reset_and_said_once(tmp_path, app_launcher):
    settings_file = tmp_path / "config" / "settings.json"
    settings_file.parent.mkdir()
    settings_file.write_text(json.dumps({"mode": "turbo", "guidance": -5, "history_max_entries": 0, "steps": 8}))
    with app_launcher(tmp_path) as app:  # "turbo" used to leave it at "Waiting for the GPU" forever
        status = Client(app.url, verbose=False).predict(api_name="/model_status")
        assert status["ready"] and status["mode"] == "hifi"
        first, second = toasts_on_a_new_page(app.url), toasts_on_a_new_page(app.url)
        log = app.log.read_text()
    said = "\n".join(first)
    assert "mode = 'turbo' is not valid" in said and "guidance = -5 is not valid" in said, first
    assert "history_max_entries = 0" in said and "steps" not in said
    assert not any("Settings" in t for t in second)  # once
    assert "guidance = -5 is not valid" in log  # and in the terminal
    stored = json.loads(settings_file.read_text())
    assert (stored["mode"], stored["guidance"], stored["history_max_entries"], stored["steps"]) == ("hifi", 2.0, 200, 8)


def test_a_crash_while_saving_loses_nothing_else(tmp_path, app_launcher, reference_wav):
    """SIGKILL the app while it generates, leave what a kill mid-append and mid-save leaves (a torn
    last index line, an unlisted WAV, temporary files, a half-written voice folder), restart: every
    finished entry and voice is there, the debris is gone, and the next result is kept."""
    fast = {"steps": 4, "randomize": False, "seed": 1}
    with app_launcher(tmp_path) as app:
        client = Client(app.url, verbose=False)
        done = [client.predict(text=f"Entry number {i}.", **fast, api_name="/design") for i in range(2)]
        assert all("Done" in out[1] for out in done)
        client.predict(name="Kept voice", reference=handle_file(str(reference_wav)), transcript="A buzzing voice.",
                       api_name="/save_voice")
        before = client.predict(api_name="/list_history")
        job = client.submit(text="A long text that is being generated when the app is killed. " * 20, **fast,
                            api_name="/design")
        while not any("Generating" in str(out[1]) for out in job.outputs()):
            time.sleep(0.1)
        app.proc.kill()
        app.proc.wait()
    history, voices = tmp_path / "data" / "history", tmp_path / "data" / "voices"
    with (history / "index.jsonl").open("a") as f:
        f.write('{"id": "20260101-000000-abcdef", "created": "2026-01-01T00:00:00+00:00", "te')
    stray = history / "audio" / "20260101-000000-abcdef.wav"
    stray.write_bytes((history / "audio" / f"{before[0]['id']}.wav").read_bytes())
    debris = [history / ".index.jsonl.k1ll.tmp", history / "audio" / ".x.wav.k1ll.tmp", voices / ".tmp-k1ll"]
    debris[0].write_text("half"), debris[1].write_text("half"), debris[2].mkdir()

    with app_launcher(tmp_path) as app:
        client = Client(app.url, verbose=False)
        assert client.predict(api_name="/list_history") == before
        assert [v["name"] for v in client.predict(api_name="/list_voices")] == ["Kept voice"]
        assert not stray.exists() and not any(d.exists() for d in debris)
        client.predict(text="After the restart.", **fast, api_name="/design")
        after = client.predict(api_name="/list_history")
    assert [e["text"] for e in after] == ["After the restart."] + [e["text"] for e in before]
