"""The OpenAI-compatible API of the launched app (`--api`, tiny random checkpoint), through the official
`openai` Python package: formats, streaming, server-sent events, voices, models, errors, history."""
import base64
import json
import time

import numpy as np
import openai
import pytest
import soundfile as sf
from gradio_client import Client, handle_file

from engine.text.limits import MAX_INSTRUCT_CHARS, MAX_TEXT_CHARS

FAST = {"steps": 4, "seed": 11}
THREE_SENTENCES = "First a short clause, then more. The second sentence follows here. And a third one ends it!"
SIX_SENTENCES = f"{THREE_SENTENCES} A fourth one starts the second half. The fifth is here. The sixth ends all."
# decoded length may exceed what was made by the codec's priming plus the last frame's padding (each
# under one frame: 1152 samples for MP3, 1024 for AAC); the other formats are sample exact
SLACK = {"mp3": 2 * 1152, "aac": 2 * 1024}


@pytest.fixture
def client(running_app):
    return openai.OpenAI(base_url=f"{running_app.url}/v1", api_key="unused-on-loopback", max_retries=0)


@pytest.fixture
def app_client(running_app):
    return Client(running_app.url, verbose=False)


def newest_entry(app_client, text: str) -> dict:
    entry = app_client.predict(api_name="/list_history")[0]
    assert entry["text"] == text
    return entry


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_every_format_decodes_to_the_audio_in_the_history(client, app_client, running_app, decode_audio, fmt):
    text = f"Every format must decode, this one is {fmt}."
    response = client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format=fmt,
                                          extra_body=FAST)
    decoded = decode_audio(response.content, fmt)
    entry = newest_entry(app_client, text)
    assert entry["source"] == "api" and entry["seed"] == FAST["seed"] and entry["voice"].startswith("alloy")
    stored, rate = sf.read(running_app.home / "data" / "history" / "audio" / entry["file"], dtype="int16")
    assert rate == 24000 and len(stored) / rate == pytest.approx(entry["audio_s"], abs=1e-9) and len(stored) > 0
    if fmt in ("flac", "wav", "pcm"):  # lossless: the very samples the history stored
        np.testing.assert_array_equal(decoded, stored)
    else:
        assert len(stored) <= len(decoded) <= len(stored) + SLACK.get(fmt, 0)


def test_streaming_delivers_audio_before_generation_ends(client, app_client, decode_audio):
    start, arrivals, data = time.monotonic(), [], b""
    with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="onyx", input=SIX_SENTENCES, response_format="pcm",
            extra_body={"steps": 32, "seed": 3}) as response:
        assert response.headers["content-type"] == "audio/pcm"
        for piece in response.iter_bytes():
            arrivals.append(time.monotonic() - start)
            data += piece
    finished_at = arrivals[-1]
    entry = newest_entry(app_client, SIX_SENTENCES)
    elapsed = entry["rtf"] * entry["audio_s"]  # the worker's time from start to the last chunk
    later_work = elapsed - entry["first_audio_s"]
    assert later_work > 0.3, "the request must take several chunks for this test to mean anything"
    # The first audio reached the client while the rest was still being generated, not in one burst.
    assert finished_at - arrivals[0] >= 0.5 * later_work
    assert len(decode_audio(data, "pcm")) == round(entry["audio_s"] * 24000)


def test_server_sent_events_in_openai_shapes(client, app_client, decode_audio):
    start, events = time.monotonic(), []
    with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="coral", input=THREE_SENTENCES, response_format="mp3",
            stream_format="sse", extra_body={"steps": 16, "seed": 5}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append((time.monotonic() - start, json.loads(line[len("data: "):])))
    *deltas, (done_at, done) = events
    assert [e["type"] for _, e in deltas] == ["speech.audio.delta"] * len(deltas) and len(deltas) >= 2
    assert done["type"] == "speech.audio.done"
    entry = newest_entry(app_client, THREE_SENTENCES)
    usage = done["usage"]
    assert usage["output_tokens"] == round(entry["audio_s"] * 25) and usage["input_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert done_at - deltas[0][0] >= 0.5 * (entry["rtf"] * entry["audio_s"] - entry["first_audio_s"])
    audio = b"".join(base64.b64decode(e["audio"]) for _, e in deltas)
    samples = round(entry["audio_s"] * 24000)
    assert samples <= len(decode_audio(audio, "mp3")) <= samples + SLACK["mp3"]


def test_a_model_is_retrieved_by_its_id(client):
    """The openai client's models.retrieve (GET /v1/models/{model}): a listed model's object, else OpenAI's 404."""
    listed = {m.id: m for m in client.models.list()}
    assert client.models.retrieve("tts-1") == listed["tts-1"]
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("whisper-1")
    assert missing.value.body["code"] == "model_not_found" and "tts-1" in missing.value.body["message"]


def test_models_and_voices(client, running_app, reference_wav, app_client):
    assert {m.id for m in client.models.list()} >= {"tts-1", "tts-1-hd", "gpt-4o-mini-tts", "omnivoice"}
    app_client.predict(name="Api Voice", reference=handle_file(str(reference_wav)),
                       transcript="A clip of a buzzing voice.", api_name="/save_voice")
    voices = client.get("/audio/voices", cast_to=object)
    assert voices["object"] == "list"
    by_id = {v["id"]: v for v in voices["data"]}
    assert by_id["api-voice"]["name"] == "Api Voice" and by_id["api-voice"]["type"] == "audio_sample"
    assert by_id["nova"]["type"] == "prompt" and "female" in by_id["nova"]["prompt"]
    # a saved voice by its name, as OpenAI's custom voice object
    text = "Speaking through the API with a saved voice."
    client.audio.speech.create(model="tts-1", voice={"id": "Api Voice"}, input=text, response_format="wav",
                               extra_body=FAST)
    assert newest_entry(app_client, text)["voice"] == "Api Voice"


@pytest.mark.parametrize("body, status, param", [
    ({"voice": "nobody"}, 404, "voice"),
    ({"input": ""}, 400, "input"),
    ({"input": "   "}, 400, "input"),
    ({"input": "x" * (MAX_TEXT_CHARS + 1)}, 413, "input"),  # one past each limit
    ({"instructions": ("female, " * 100)[:MAX_INSTRUCT_CHARS + 1]}, 413, "instructions"),
    ({"input": 42}, 400, "input"),
    ({"speed": "fast"}, 400, "speed"),
    ({"speed": 9.0}, 400, "speed"),
    ({"response_format": "ogg"}, 400, "response_format"),
    ({"model": "whisper-1"}, 400, "model"),
    ({"instructions": "Speak like a pirate"}, 400, "instructions"),
    ({"language": "Klingon"}, 400, "language"),
    ({"quality": "realtime"}, 400, "quality"),
])
def test_bad_bodies_get_openai_errors(client, body, status, param):
    request = {"model": "tts-1", "voice": "alloy", "input": "Hello.", **body}
    with pytest.raises(openai.APIStatusError) as caught:
        client.post("/audio/speech", body=request, cast_to=object)
    err = caught.value
    assert err.status_code == status, err.body
    assert err.body["param"] == param and err.body["type"] == "invalid_request_error" and err.body["message"]


def test_take_checks_reach_the_sse_done_event_and_the_history(client, app_client):
    """With the app's checks on (here best of 2), the `done` event carries every part's verdict beside
    OpenAI's fields, and the history keeps the same; with checks off the event has no such key."""
    app_client.predict("best_of_n", 2, 2, 0.2, 0.75, api_name="/set_checks")
    try:
        with client.audio.speech.with_streaming_response.create(
                model="tts-1", voice="alloy", input=THREE_SENTENCES, response_format="pcm", stream_format="sse",
                extra_body=FAST) as response:
            events = [json.loads(line[len("data: "):]) for line in response.iter_lines() if line.startswith("data: ")]
    finally:
        app_client.predict("off", api_name="/set_checks")
    done = events[-1]
    assert done["type"] == "speech.audio.done" and done["usage"]["output_tokens"] > 0
    checks = done["checks"]
    assert checks["mode"] == "best_of_n" and len(checks["parts"]) >= 2
    assert all(p["attempts"] == 2 and "pauses" in p["checks"] for p in checks["parts"])
    assert newest_entry(app_client, THREE_SENTENCES)["checks"] == checks
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input="Unchecked.", response_format="pcm", stream_format="sse",
            extra_body=FAST) as response:
        done = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")][-1]
    assert "checks" not in done
