"""API requests a stranger's planted bugs got past: a key off loopback, bad bodies answered 400 (never 500),
seed 0 honoured, and the fields newer OpenAI clients send accepted."""
import httpx
import pytest

from app.api.access import ApiAccess, bind_refusal
from app.api.errors import ApiError
from app.api.schemas import parse_speech
from app.settings import Settings

BODY = {"model": "tts-1", "voice": "alloy", "input": "Seed zero, twice.", "response_format": "wav", "steps": 4}


def test_off_loopback_a_key_is_required():
    assert bind_refusal("0.0.0.0", None) and bind_refusal("192.168.1.5", "") and bind_refusal("::", None)
    assert bind_refusal("127.0.0.1", None) is None and bind_refusal("0.0.0.0", "k") is None
    keyed = ApiAccess(key="right", forced_on=True)
    for authorization in (None, "", "Bearer wrong", "Basic right", "right", "Bearer right-ish"):
        with pytest.raises(ApiError) as caught:
            keyed.check(Settings(), authorization)
        assert caught.value.status == 401, authorization
    keyed.check(Settings(), "Bearer right")
    keyed.check(Settings(), "bearer  right ")


def test_fields_newer_openai_clients_send_are_accepted():
    body = parse_speech({**BODY, "voice": {"id": "alloy"}, "stream_format": "sse", "instructions": "female",
                         "metadata": {"user": "x"}, "future_option": 3})
    assert body.voice_id == "alloy" and body.stream_format == "sse"


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b"null", b'{"model": "tts-1"}', b"\xff\xfe"])
def test_bad_bodies_are_400_not_500(running_app, content):
    answer = httpx.post(f"{running_app.url}/v1/audio/speech", content=content,
                        headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_seed_zero_is_honoured(running_app):
    """seed 0 is a seed, not 'no seed': the same request twice gives the same audio."""
    first, second = (httpx.post(f"{running_app.url}/v1/audio/speech", json={**BODY, "seed": 0}, timeout=300)
                     for _ in range(2))
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    other = httpx.post(f"{running_app.url}/v1/audio/speech", json={**BODY, "seed": 1}, timeout=300)
    assert other.content != first.content  # the control: the seed decides the sound
