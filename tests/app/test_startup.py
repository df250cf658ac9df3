"""Starting the launched app on a data folder that a person or a crash left in a bad state."""
import json
import shutil
from pathlib import Path

import pytest
from gradio_client import Client

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
