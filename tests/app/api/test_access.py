"""Who may use the API: off by default, loopback only without a key, a key beyond loopback (`serve`,
headless), no requests from other websites (a real browser), and a full queue answered 429."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
from busy_worker import BusyWorker
from conftest import ROOT, free_port
from gradio_client import Client
from pages import CHROMIUM, needs_chromium
from served import CPU_ONLY

from app.api.access import ApiAccess
from app.api.errors import ApiError
from app.settings import Settings

KEY = "sk-test-key-for-voicedesk"
BODY = {"model": "tts-1", "voice": "alloy", "input": "A keyed request.", "response_format": "wav", "steps": 4}


def speech_args() -> dict:
    """BODY as the openai client takes it: VoiceDesk's own fields go in extra_body."""
    return {**{k: v for k, v in BODY.items() if k != "steps"}, "extra_body": {"steps": BODY["steps"]}}


def launch(home: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "VOICEDESK_API_KEY"}
    return subprocess.Popen([sys.executable, "launcher.py", *args, "--demo"], cwd=ROOT,
                            env={**env, "VOICEDESK_HOME": str(home), **CPU_ONLY}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def keyed_api(tmp_path_factory, request):
    """`voicedesk serve` on every interface with a key, at most one API request waiting."""
    home = tmp_path_factory.mktemp("keyed_home")
    (home / "config").mkdir()
    (home / "config" / "settings.json").write_text(json.dumps({"api_max_waiting": 1}))
    port = free_port()
    proc = launch(home, "serve", "--host", "0.0.0.0", "--port", str(port), "--api-key", KEY)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    try:
        while True:  # listening, and the model loaded (503 until then)
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the API did not become ready"
            try:
                answer = httpx.post(f"{url}/v1/audio/speech", json=BODY, headers={"Authorization": f"Bearer {KEY}"})
                if answer.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize("command", [["serve"], ["ui", "--api", "--no-browser"], ["ui", "--no-browser"]])
def test_beyond_loopback_without_a_key_it_refuses_to_start(tmp_path, command):
    """The page too: without the API its endpoints would be open to the network."""
    proc = launch(tmp_path, *command, "--host", "0.0.0.0", "--port", str(free_port()))
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 2 and "API key" in out


def test_the_key_is_required(keyed_api):
    wrong = openai.OpenAI(base_url=f"{keyed_api}/v1", api_key="wrong-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.audio.speech.create(**speech_args())
    assert caught.value.body["code"] == "invalid_api_key"
    assert httpx.get(f"{keyed_api}/v1/models").status_code == 401  # no key at all
    client = openai.OpenAI(base_url=f"{keyed_api}/v1", api_key=KEY, max_retries=0)
    assert client.audio.speech.create(**speech_args()).content[:4] == b"RIFF"
    assert "tts-1" in {m.id for m in client.models.list()}


def test_headless_serves_no_ui(keyed_api):
    assert httpx.get(keyed_api).status_code == 404


def test_a_full_queue_is_answered_429(keyed_api):
    """One request runs, one waits (api_max_waiting=1): a third is refused at once, in OpenAI's shape."""
    headers = {"Authorization": f"Bearer {KEY}"}
    waited = []
    with BusyWorker(keyed_api, headers) as busy:
        waiting = threading.Thread(target=lambda: waited.append(
            httpx.post(f"{keyed_api}/v1/audio/speech", json=BODY, headers=headers, timeout=120).status_code))
        waiting.start()
        time.sleep(2)  # the second request reaches the server; it cannot start while the worker is busy
        refused = httpx.post(f"{keyed_api}/v1/audio/speech", json=BODY, headers=headers)
        assert busy.running, "the long request ended early: nothing was waiting"
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["type"] == "rate_limit_error" and refused.headers["retry-after"]
    waiting.join(120)
    assert waited == [200]  # the one in line ran once the long one was let go


def test_off_unless_switched_on():
    settings = Settings()
    with pytest.raises(ApiError) as caught:
        ApiAccess(key=None, forced_on=False).check(settings, None)
    assert caught.value.status == 404
    settings.api = True
    ApiAccess(key=None, forced_on=False).check(settings, None)
    ApiAccess(key=None, forced_on=True).check(Settings(), None)


@needs_chromium
def test_other_websites_cannot_use_the_api_from_a_browser(running_app, tmp_path):
    """A page on another origin posts a speech request as a plain form-like fetch (no preflight);
    the same script from the app's own page is the control that shows the request would work."""
    from playwright.sync_api import sync_playwright

    (tmp_path / "index.html").write_text("<html><body>elsewhere</body></html>")
    port = free_port()
    site = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    script = """async ([url, text]) => {
        try {
            const r = await fetch(url + "/v1/audio/speech", {method: "POST", mode: "no-cors",
                headers: {"Content-Type": "text/plain"},
                body: JSON.stringify({model: "tts-1", voice: "alloy", input: text, steps: 4})});
            await r.arrayBuffer();
            return r.type;
        } catch (e) { return "failed: " + e; }
    }"""
    history = Client(running_app.url, verbose=False)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page()
            for _ in range(50):
                try:
                    page.goto(f"http://127.0.0.1:{port}/")
                    break
                except Exception:  # the little site is still starting
                    time.sleep(0.2)
            page.evaluate(script, [running_app.url, "Sent from another website."])
            page.goto(running_app.url)
            page.evaluate(script, [running_app.url, "Sent from the app's own page."])
            browser.close()
    finally:
        site.terminate()
    texts = [e["text"] for e in history.predict(api_name="/list_history")]
    assert "Sent from the app's own page." in texts
    assert "Sent from another website." not in texts
