"""First start with no weights and no network (no --demo, no --model, an empty Hugging Face cache, downloads
off): the terminal and the page both say what happened and the three ways forward."""
import os
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ROOT, free_port
from gradio_client import Client
from pages import needs_chromium

pytestmark = needs_chromium
WAYS = ("connect to the internet", "--model DIR", "--demo")


@pytest.fixture
def bare_app(tmp_path):
    """`launcher.py` as a new user starts it, on a computer that has no model and cannot download one."""
    env = {k: v for k, v in os.environ.items() if k != "VOICEDESK_MODEL"}
    env.update(VOICEDESK_HOME=str(tmp_path / "home"), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    log, port = tmp_path / "terminal.log", free_port()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "launcher.py", "--no-browser", "--port", str(port)], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300
    try:
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                if Client(url, verbose=False).predict(api_name="/model_status")["stage"] == "failed":
                    break
            except (httpx.HTTPError, OSError, ValueError):
                pass  # not listening yet
            time.sleep(1)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(20)


def test_no_model_and_no_network_says_what_happened_and_the_ways_forward(bare_app, browser):
    url, log = bare_app
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#vd-model-status[data-stage=failed]", timeout=60_000)
    shown = page.locator("#vd-model-status").inner_text()
    generate_disabled = page.locator("#clone-generate").is_disabled()
    context.close()
    deadline = time.monotonic() + 30  # the terminal line is written by the loading thread
    while "could not be loaded" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    terminal = log.read_text()
    for where, text in (("page", shown), ("terminal", terminal)):
        assert "not on this computer and could not be downloaded" in text, f"{where}: {text}"
        assert all(way in text for way in WAYS), f"{where}: {text}"
    assert generate_disabled
