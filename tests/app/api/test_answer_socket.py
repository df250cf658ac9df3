"""`WS /v1/audio/answer` of the launched API (`voicedesk serve` with a key), through the `websockets` client: text
deltas in, each clause's event and audio out as soon as it completes (order and content; never timing), audio equal
to the engine's render of each clause, and every bad input answered with an error message and its close code."""
import json

import httpx
import numpy as np
import pytest
from served import serving
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from app.answer import CLOSED_EARLY
from app.api.answer_socket import MAX_MESSAGE_BYTES
from app.api.speech import LANE
from app.library import VoiceLibrary
from app.settings import Settings
from engine import Engine
from engine.audio.pcm import to_int16
from engine.constants import DEMO_MODEL, SAMPLE_RATE
from engine.request import SpeechRequest
from engine.text.limits import MAX_TEXT_CHARS

KEY = "answer-socket-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
RECV_TIMEOUT_S = 240  # one message; generous: a loaded two-core machine speaks a clause in seconds
SAVED = "Narrator"


def answers_speech(port: int, log: str) -> bool:
    """The model is ready once a tiny speech request is answered."""
    try:
        body = {"model": "tts-1", "input": "Hi.", "voice": "alloy", "steps": 4, "response_format": "pcm"}
        return httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", headers=AUTH, timeout=60, json=body).is_success
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    """`voicedesk serve --demo --api-key KEY` with one saved voice: (ws url, folders, process, log)."""
    with serving(tmp_path_factory.mktemp("answer_home"), ["--demo", "--api-key", KEY], ready=answers_speech,
                 voice=SAVED) as (port, dirs, proc, log):
        yield f"ws://127.0.0.1:{port}/v1/audio/answer", dirs, proc, log


@pytest.fixture(scope="module")
def engine():
    return Engine.load(DEMO_MODEL, device="cpu", mode="eager")


def start(**fields) -> str:
    return json.dumps({"type": "start", "voice": SAVED, "steps": 4, "seed": 5, **fields})


def text(delta: str) -> str:
    return json.dumps({"type": "text", "text": delta})


def receive_clause(ws) -> tuple[dict, np.ndarray]:
    event = json.loads(ws.recv(timeout=RECV_TIMEOUT_S))
    assert event["type"] == "clause", event
    audio = ws.recv(timeout=RECV_TIMEOUT_S)
    assert isinstance(audio, bytes)
    return event, np.frombuffer(audio, "<i2")


def test_deltas_in_clauses_and_audio_out_as_each_completes(api, engine):
    url, dirs, _, _ = api
    with connect(url, additional_headers=AUTH, max_size=None) as ws:
        ws.send(start())
        started = json.loads(ws.recv(timeout=RECV_TIMEOUT_S))
        assert started == {"type": "started", "seed": 5, "sample_rate": SAMPLE_RATE, "format": "pcm_s16le",
                           "checks": {"mode": "off"}}
        for delta in ["The lights", " are", " off", ".", " Tomorrow"]:  # " Tomorrow" shows the sentence ended
            ws.send(text(delta))
        heard = [receive_clause(ws)]  # a policy that waited for the end would never send this
        for delta in [" will", " be", " sunny", ", warm", " and", " dry", "!", " Good", "night"]:
            ws.send(text(delta))
        ws.send(json.dumps({"type": "end"}))
        heard += [receive_clause(ws), receive_clause(ws)]
        done = json.loads(ws.recv(timeout=RECV_TIMEOUT_S))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=RECV_TIMEOUT_S)
    assert ws.close_code == 1000
    texts = ["The lights are off.", "Tomorrow will be sunny, warm and dry!", "Goodnight"]
    assert [event["text"] for event, _ in heard] == texts and [event["index"] for event, _ in heard] == [0, 1, 2]
    [entry] = VoiceLibrary.open(dirs).entries()
    voice = VoiceLibrary.open(dirs).load_voice(entry.slug)
    config = Settings(steps=4).generation_config(None)
    position = 0.0
    for index, (event, pcm) in enumerate(heard):
        expected = engine.render(SpeechRequest(text=texts[index], voice=voice, config=config.replace(seed=5 + index)))
        np.testing.assert_array_equal(pcm, to_int16(expected[0].audio))  # the saved voice, every clause
        assert event["start"] == pytest.approx(position, abs=1e-6)
        assert event["duration"] == pytest.approx(len(pcm) / SAMPLE_RATE, abs=1e-6)
        assert set(event["timing"]) == {"queue", "engine"} and event["timing"]["engine"] > 0
        position += len(pcm) / SAMPLE_RATE
    assert done == {"type": "done", "clauses": 3, "duration": pytest.approx(position, abs=1e-5)}


def refused(url: str, *messages, headers=AUTH) -> tuple[dict, int]:
    """The error message and close code the server answers `messages` with (str: text, bytes: binary)."""
    replies = []
    with connect(url, additional_headers=headers, max_size=None) as ws:
        try:
            for message in messages:
                ws.send(message)
        except ConnectionClosed:
            pass  # refused before all were sent (a missing key: at once)
        with pytest.raises(ConnectionClosed):
            while True:
                replies.append(ws.recv(timeout=RECV_TIMEOUT_S))
    errors = [json.loads(r) for r in replies if isinstance(r, str) and json.loads(r)["type"] == "error"]
    assert len(errors) == 1, replies
    assert set(errors[0]["error"]) == {"message", "type", "param", "code"}
    return errors[0]["error"], ws.close_code


@pytest.mark.parametrize("messages, headers, code", [
    ([start()], {}, 4401),
    ([start()], {"Authorization": "Bearer wrong"}, 4401),
    ([text("Hello.")], AUTH, 4400),
    (["not json"], AUTH, 4400),
    (["[1, 2]"], AUTH, 4400),
    (["[" * 20_000], AUTH, 4400),  # nested past json's recursion limit
    ([start(), "[" * 20_000], AUTH, 4400),
    ([b"\x00\x01"], AUTH, 1003),
    ([start(voice="nobody-here")], AUTH, 4404),
    ([start(steps=1000)], AUTH, 4400),
    ([start(check_budget_ms=10_001)], AUTH, 4400),
    ([start(check_budget_ms=-1)], AUTH, 4400),
    ([start(language="Klingon")], AUTH, 4400),
    ([start(instructions="speak cheerfully")], AUTH, 4400),
    ([start(), json.dumps({"type": "shout"})], AUTH, 4400),
    ([start(), json.dumps({"type": "text", "text": 5})], AUTH, 4400),
    ([start(), text("x" * MAX_TEXT_CHARS), text("y")], AUTH, 4413),
])
def test_bad_input_gets_an_error_and_its_close_code(api, messages, headers, code):
    error, close_code = refused(api[0], *messages, headers=headers)
    assert close_code == code, error
    assert "Traceback" not in error["message"]


def test_a_message_is_held_to_one_mib_of_utf8(api):
    """A start padded with spaces to exactly MAX_MESSAGE_BYTES is taken; one byte more is refused, as is a text
    message under the limit in characters but over it in bytes (two-byte characters)."""
    exactly = start() + " " * (MAX_MESSAGE_BYTES - len(start()))
    with connect(api[0], additional_headers=AUTH, max_size=None) as ws:
        ws.send(exactly)
        assert json.loads(ws.recv(timeout=RECV_TIMEOUT_S))["type"] == "started"
    wide = json.dumps({"type": "text", "text": "\u00e9" * (MAX_MESSAGE_BYTES // 2)}, ensure_ascii=False)
    assert len(wide) < MAX_MESSAGE_BYTES < len(wide.encode())
    for messages in ([exactly + " "], [start(), wide]):
        error, close_code = refused(api[0], *messages)
        assert (close_code, error["code"]) == (4413, "message_too_long"), error


def test_another_websites_page_cannot_open_it(api):
    with pytest.raises(InvalidStatus) as refusal:
        connect(api[0], additional_headers=AUTH, origin="http://evil.example")
    assert refusal.value.response.status_code == 403


def test_a_client_that_leaves_mid_answer_frees_the_gpu(api):
    """The longest text, left after its first clause: its hundreds of clause jobs, which would keep the API's lane
    busy for many minutes, are stopped, as the server's log says (the worker found jobs still to stop), and the
    next answer is spoken. Nothing here is timed."""
    url, _, proc, log = api
    sentences = ("Here is one more sentence of a very long answer. " * 1000)[:MAX_TEXT_CHARS - 10]
    earlier = len(log.read_text())
    with connect(url, additional_headers=AUTH, max_size=None) as ws:
        ws.send(start())
        ws.recv(timeout=RECV_TIMEOUT_S)  # started
        ws.send(text(sentences))
        receive_clause(ws)
    with connect(url, additional_headers=AUTH, max_size=None) as ws:
        ws.send(start())
        ws.recv(timeout=RECV_TIMEOUT_S)
        ws.send(text("Next in line."))
        ws.send(json.dumps({"type": "end"}))
        event, _ = receive_clause(ws)
    assert event["text"] == "Next in line."
    logged = log.read_text()[earlier:]  # written before the next answer could start (the loop's one thread)
    assert CLOSED_EARLY % LANE in logged, logged
    assert proc.poll() is None and "Traceback" not in log.read_text()


def test_with_the_take_checks_on_each_clause_says_what_was_checked(tmp_path_factory):
    """Best of 2 in the app's settings, no check models on this computer (an empty hub cache): `started` says the
    words and voice checks are off here, and every clause carries its verdict, which says so too and why. A
    budget of 0 turns the checks off for the answer."""
    settings = json.dumps({"check_mode": "best_of_n", "check_candidates": 2})
    with serving(tmp_path_factory.mktemp("checked_home"), ["--demo", "--api-key", KEY], ready=answers_speech,
                 voice=SAVED, settings=settings, env={"HF_HUB_CACHE": str(tmp_path_factory.mktemp("no_models"))}
                 ) as (port, _, _, _):
        url = f"ws://127.0.0.1:{port}/v1/audio/answer"
        with connect(url, additional_headers=AUTH, max_size=None) as ws:
            ws.send(start(check_budget_ms=2000))
            checks = json.loads(ws.recv(timeout=RECV_TIMEOUT_S))["checks"]
            ws.send(text("Checked one. And checked two."))
            ws.send(json.dumps({"type": "end"}))
            heard = [receive_clause(ws), receive_clause(ws)]
        with connect(url, additional_headers=AUTH, max_size=None) as ws:
            ws.send(start(check_budget_ms=0))
            unchecked = json.loads(ws.recv(timeout=RECV_TIMEOUT_S))["checks"]
            ws.send(text("Unchecked."))
            ws.send(json.dumps({"type": "end"}))
            event, _ = receive_clause(ws)
    assert checks["mode"] == "best_of_n" and checks["budget_ms"] == 2000 and set(checks["off"]) == {"words", "voice"}
    assert "not on this computer" in checks["off"]["words"]
    assert unchecked == {"mode": "off"} and "checks" not in event
    for event, pcm in heard:
        checks = event["checks"]
        assert checks["attempts"] == 2 and {"words", "voice"} <= set(checks["skipped"]), checks
        assert len(pcm) > 0


def test_with_the_take_checks_off_no_clause_carries_a_verdict(api):
    with connect(api[0], additional_headers=AUTH, max_size=None) as ws:
        ws.send(start())
        json.loads(ws.recv(timeout=RECV_TIMEOUT_S))
        ws.send(text("Unchecked."))
        ws.send(json.dumps({"type": "end"}))
        event, _ = receive_clause(ws)
    assert "checks" not in event
