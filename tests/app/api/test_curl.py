"""The launched app's OpenAI-compatible API through curl: streaming to a file, a client that hangs up
mid-stream, eight requests at once, and bodies that are not what OpenAI's API accepts."""
import json
import subprocess
import time

import pytest
from busy_worker import BusyWorker
from gradio_client import Client

from app.answer import CLOSED_EARLY
from app.api.speech import LANE

LONG_TEXT = " ".join(f"This is sentence number {i} of a long text that keeps the engine busy." for i in range(40))


def curl(url: str, body: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", "-N", "-H", "Content-Type: application/json", "-d", body, *args,
                           f"{url}/v1/audio/speech"], capture_output=True, timeout=timeout)


def history_texts(url: str) -> list[str]:
    return [e["text"] for e in Client(url, verbose=False).predict(api_name="/list_history")]


def test_curl_writes_a_playable_file(running_app, tmp_path, decode_audio):
    out = tmp_path / "speech.opus"
    body = json.dumps({"model": "tts-1", "input": "Curl asked for this.", "voice": "echo",
                       "response_format": "opus", "steps": 4})
    done = curl(running_app.url, body, "-o", str(out), "-w", "%{http_code} %{content_type}")
    assert done.returncode == 0 and done.stdout.decode() == "200 audio/ogg", done.stderr
    assert len(decode_audio(out.read_bytes(), "opus")) > 0


def test_hanging_up_mid_stream_frees_the_worker(running_app):
    body = json.dumps({"model": "tts-1", "input": LONG_TEXT, "voice": "alloy", "response_format": "pcm",
                       "steps": 64})
    earlier = len(running_app.log.read_text())
    gave_up = curl(running_app.url, body, "-o", "/dev/null", "--max-time", "4")
    assert gave_up.returncode == 28, gave_up.stderr  # 28: curl's own timeout, the stream was still going
    # Had the long generation gone on, this request would wait minutes for its turn.
    short = json.dumps({"model": "tts-1", "input": "Next in line.", "voice": "alloy", "steps": 4})
    done = curl(running_app.url, short, "-o", "/dev/null", "-w", "%{http_code}")
    assert done.stdout.decode() == "200"
    assert running_app.logs(CLOSED_EARLY % LANE, since=earlier)  # its job was found running, and stopped
    assert LONG_TEXT not in history_texts(running_app.url)  # stopped results are not stored


def test_eight_concurrent_requests_are_all_answered(running_app, tmp_path, decode_audio):
    texts = [f"Concurrent request number {i}." for i in range(8)]
    procs = [subprocess.Popen(["curl", "-sS", "-H", "Content-Type: application/json", "-o", str(tmp_path / f"{i}.wav"),
                               "-w", "%{http_code}", "-d", json.dumps({"model": "tts-1", "input": text, "voice": "sage",
                                                                     "response_format": "wav", "steps": 4}),
                               f"{running_app.url}/v1/audio/speech"], stdout=subprocess.PIPE)
             for i, text in enumerate(texts)]
    codes = [p.communicate(timeout=600)[0].decode() for p in procs]
    assert codes == ["200"] * 8
    assert all(len(decode_audio((tmp_path / f"{i}.wav").read_bytes(), "wav")) > 0 for i in range(8))
    assert set(texts) <= set(history_texts(running_app.url))


@pytest.mark.parametrize("body, status", [
    ("this is not json", 400),
    ("[1, 2, 3]", 400),
    ('{"model": "tts-1", "voice": "alloy"}', 400),
    ('{"model": "tts-1", "input": "Hi.", "voice": {"name": "alloy"}}', 400),
    ('{"model": "tts-1", "input": "Hi.", "voice": "no-such-voice"}', 404),
    ('{"model": "tts-1", "input": "Hi.", "voice": "alloy", "steps": 1000}', 400),
    ("[" * 5000 + "]" * 5000, 400),  # deeper than Python's JSON parser goes (it was a 500)
])
def test_bad_bodies_get_openai_error_shapes(running_app, body, status):
    done = curl(running_app.url, body, "-w", "\n%{http_code}")
    payload, code = done.stdout.decode().rsplit("\n", 1)
    assert int(code) == status
    error = json.loads(payload)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert "Traceback" not in error["message"]


def test_a_lone_surrogate_in_the_input_is_spoken_and_stored_without_it(running_app):
    """An escaped half of a UTF-16 pair, valid JSON: the engine drops it from what it speaks, and the History keeps
    the text without it (storing it broke the stream after it had started)."""
    body = '{"model": "tts-1", "input": "Curl sent a lone \\ud800half.", "voice": "alloy", "response_format": "pcm", ' \
           '"steps": 4}'
    done = curl(running_app.url, body, "-o", "/dev/null", "-w", "%{http_code}")
    assert done.returncode == 0 and done.stdout.decode() == "200", done.stderr
    assert "Curl sent a lone half." in history_texts(running_app.url)


def test_a_burst_of_api_requests_lets_the_app_user_go_next(running_app):
    """While one API request runs and three more wait, the page asks: its generation starts next."""
    texts = [f"Burst request {i}, one sentence. And a second one to keep the engine busy." for i in range(3)]
    page_text = "The person at the app asked for this."
    client = Client(running_app.url, verbose=False)
    with BusyWorker(running_app.url) as busy:
        procs = [subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-H", "Content-Type: application/json", "-d",
                                   json.dumps({"model": "tts-1", "input": text, "voice": "ash", "steps": 32}),
                                   f"{running_app.url}/v1/audio/speech"]) for text in texts]
        time.sleep(2)  # the three reach the server and wait: the worker is busy
        job = client.submit(text=page_text, gender="female", steps=4, randomize=False, seed=1, api_name="/design")
        deadline = time.monotonic() + 60
        while "Waiting in line" not in str(job.outputs()):
            assert time.monotonic() < deadline, job.outputs()
            time.sleep(0.1)
        assert busy.running, "the long request ended early: no line formed"
    job.result()
    for proc in procs:
        assert proc.wait(600) == 0
    order = [t for t in reversed(history_texts(running_app.url)) if t in texts or t == page_text]  # oldest first
    assert order[0] == page_text and sorted(order[1:]) == texts, order


@pytest.mark.parametrize("method, path, status, code", [
    ("GET", "/v1/audio/speech", 405, "method_not_allowed"),
    ("POST", "/v1/audio/voices", 405, "method_not_allowed"),
    ("POST", "/v1/models/tts-1", 405, "method_not_allowed"),  # a path of a route with a parameter
    ("DELETE", "/v1/models/whisper-1", 405, "method_not_allowed"),  # any id: the path is the route's
    ("GET", "/v1/files", 404, "not_found"),
    ("DELETE", "/v1/audio/transcriptions", 404, "not_found"),
])
def test_other_methods_and_paths_under_v1_get_openai_error_shapes(running_app, method, path, status, code):
    """OpenAI's clients read error.message: FastAPI's own {"detail": ...} for these left them nothing to show."""
    import httpx

    response = httpx.request(method, f"{running_app.url}{path}", timeout=60)
    error = response.json()["error"]
    assert response.status_code == status and error["code"] == code and error["type"] == "invalid_request_error"
    if status == 405:
        assert response.headers["allow"] == ("POST" if path.endswith("speech") else "GET")
        assert error["message"] == f"{path} takes {response.headers['allow']}, not {method}."
    else:
        assert error["message"].startswith(f"There is no {method} ") and "POST /v1/audio/speech" in error["message"]
