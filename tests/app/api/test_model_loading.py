"""While the model is still loading, the launched app's API answers 503 in OpenAI's error shape with a
Retry-After, never a 500 or a hang. The loading window is held open for as long as the test needs: the app
is started on a hub model that is not on this computer, from a model hub (huggingface_hub's HF_ENDPOINT)
that the test runs and that answers only when the test lets it."""
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import openai
import pytest
from conftest import free_port

ROOT = Path(__file__).resolve().parents[3]
BODY = {"model": "tts-1", "voice": "alloy", "input": "Are you there yet?"}


class HeldHub:
    """A model hub that takes every request and holds it until `release()`, then says there is no such model."""

    def __init__(self):
        self.asked, self.released = threading.Event(), threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                hub.asked.set()
                hub.released.wait(300)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_GET

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self):
        self.released.set()

    def close(self):
        self.release()
        self.server.shutdown()


@pytest.fixture
def loading_app(tmp_path):
    """`voicedesk serve` whose model is still downloading from the held hub: (API url, hub, process)."""
    hub, port = HeldHub(), free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HF_HUB_OFFLINE")},
           "VOICEDESK_HOME": str(tmp_path / "home"), "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.url}
    log = (tmp_path / "app.log").open("w")
    proc = subprocess.Popen([sys.executable, "launcher.py", "serve", "--model", "voicedesk-tests/held-model",
                             "--port", str(port)], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:  # the app asked the hub for its model, and its API listens
            assert proc.poll() is None, (tmp_path / "app.log").read_text()
            assert time.monotonic() < deadline, f"the app did not start:\n{(tmp_path / 'app.log').read_text()}"
            try:
                if hub.asked.wait(0.2):
                    httpx.get(f"{url}/v1/models", timeout=5)
                    break
            except httpx.HTTPError:
                pass
        yield url, hub, proc
    finally:
        hub.close()
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def assert_not_ready(error: openai.APIStatusError, words: str) -> None:
    assert error.status_code == 503
    assert error.response.headers["retry-after"] == "5"
    body = error.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "server_error" and body["error"]["code"] == "model_not_ready"
    assert body["error"]["param"] is None and words in body["error"]["message"], body


def test_the_api_says_503_with_retry_after_while_the_model_loads(loading_app):
    url, hub, proc = loading_app
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused-on-loopback", max_retries=0)
    with pytest.raises(openai.APIStatusError) as plain:
        client.audio.speech.create(**BODY)
    with pytest.raises(openai.APIStatusError) as streamed:
        with client.audio.speech.with_streaming_response.create(**BODY, stream_format="sse"):
            pass
    assert not hub.released.is_set()  # both answers came while the model was still being fetched
    assert_not_ready(plain.value, "still loading")
    assert_not_ready(streamed.value, "still loading")

    hub.release()  # the hub has no such model: loading fails, and the API says so, still as a 503
    deadline = time.monotonic() + 120
    while True:
        with pytest.raises(openai.APIStatusError) as failed:
            client.audio.speech.create(**BODY)
        if "could not be loaded" in failed.value.response.text:
            break
        assert_not_ready(failed.value, "still loading")
        assert time.monotonic() < deadline, "loading did not end after the hub answered"
        time.sleep(0.2)
    assert_not_ready(failed.value, "could not be loaded")
    assert proc.poll() is None  # the app keeps serving
