"""A speech request whose client disconnects before the first audio: its generation is stopped (the stream's audio
closed), and nothing is logged for it as a refusal: nobody is there to refuse, and stopping the generation logs
CLOSED_EARLY (app/answer.py), the one line such a client leaves in the terminal."""
import json
import logging
from types import SimpleNamespace

import anyio
from starlette.requests import Request

from app.api import routes
from app.api.access import ApiAccess

BODY = {"model": "tts-1", "input": "Hello.", "voice": "alloy", "response_format": "pcm"}


class NeverSpeaks:
    """A SpeechStream whose first audio never comes (the request waits in line); it records being closed."""
    closed = False

    def __init__(self, ctx, body, max_waiting):
        pass

    async def audio(self):
        try:
            await anyio.sleep_forever()
            yield b""
        finally:
            NeverSpeaks.closed = True


def speech_endpoint():
    ctx = SimpleNamespace(settings=SimpleNamespace(api=True, api_max_waiting=4))
    [route] = [r for r in routes.api_routes(ctx, ApiAccess(key=None, forced_on=True)) if r.path == "/v1/audio/speech"]
    return route.endpoint


def leaving_request() -> Request:
    """The body, then the client's disconnect."""
    messages = iter([{"type": "http.request", "body": json.dumps(BODY).encode(), "more_body": False},
                     {"type": "http.disconnect"}])

    async def receive():
        return next(messages)

    scope = {"type": "http", "method": "POST", "path": "/v1/audio/speech", "query_string": b"",
             "headers": [(b"content-type", b"application/json")]}
    return Request(scope, receive)


def test_a_client_gone_before_the_first_audio_stops_it_and_is_no_refusal_in_the_log(monkeypatch, caplog):
    monkeypatch.setattr(routes, "SpeechStream", NeverSpeaks)
    monkeypatch.setattr(NeverSpeaks, "closed", False)
    endpoint = speech_endpoint()

    async def ask():
        await endpoint(leaving_request())
        return NeverSpeaks.closed  # by the route itself, before the loop's end closes what is left open

    with caplog.at_level(logging.INFO, logger="app.api"):
        assert anyio.run(ask)
    assert caplog.records == [], caplog.text
