"""A user's mistake is one line in the app's terminal (what was refused and why), through the page's
endpoints and the OpenAI-compatible API alike; a traceback there means a bug."""
import logging
import time

import httpx
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

FAST = {"steps": 4, "randomize": False, "seed": 7}


def new_log_lines(app, start: int, expected: int) -> list[str]:
    """The lines the app logged after `start` bytes, once there are `expected` of them (logging may trail the
    answer by a moment), or whatever is there after a generous wait."""
    deadline = time.monotonic() + 30
    while True:
        lines = app.log.read_bytes()[start:].decode("utf-8", "replace").splitlines()
        if len(lines) >= expected or time.monotonic() > deadline:
            return lines
        time.sleep(0.2)


def page_errors(client, reference_wav):
    yield "Type the text to speak first.", lambda: client.predict(text="  ", **FAST, api_name="/design")
    yield "Record or upload a reference clip first", lambda: client.predict(
        reference=None, transcript="", text="Hello.", **FAST, api_name="/clone")
    yield "There is no saved voice 'nobody-saved-this'", lambda: client.predict(
        voice_slug="nobody-saved-this", reference=None, transcript="", text="Hi.", **FAST, api_name="/clone")
    yield "Steps must be from 4 to 64, not 0.", lambda: client.predict(text="Hi.", steps=0, randomize=False,
                                                                      seed=1, api_name="/design")
    yield "Give the voice a name.", lambda: client.predict(
        name=" ", reference=handle_file(str(reference_wav)), transcript="A buzz.", api_name="/save_voice")


def api_errors(url):
    def speech(**body):
        return lambda: httpx.post(f"{url}/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": "Hi.",
                                                                  **body}, timeout=60)
    yield "There is no text to speak", speech(input="")
    yield "There is no voice 'nobody'", speech(voice="nobody")
    yield "Unknown instruct items: 'femal' (did you mean 'female'?), 'robot voice'.", speech(
        instructions="femal, robot voice")
    yield "speed: Input should be less than or equal to 4", speech(speed=9)


def test_each_user_error_is_one_line_in_the_terminal(running_app, reference_wav):
    client = Client(running_app.url, verbose=False)
    for message, make_the_mistake in [*page_errors(client, reference_wav), *api_errors(running_app.url)]:
        start = running_app.log.stat().st_size
        try:
            answer = make_the_mistake()
        except AppError as err:
            assert message in str(err)
        else:
            assert 400 <= answer.status_code < 500 and message in answer.text, answer.text
        lines = new_log_lines(running_app, start, 1)
        assert len(lines) == 1 and message in lines[0], (message, lines)


def test_a_bug_keeps_its_traceback_for_the_terminal(caplog):
    from app.api.routes import as_api_error

    try:
        raise RuntimeError("a bug")
    except RuntimeError as bug:
        with caplog.at_level(logging.ERROR, logger="app"):
            error = as_api_error(bug)
    assert error.status == 500 and "Traceback" not in error.message  # the client gets no traceback
    assert "Traceback (most recent call last)" in caplog.text and "RuntimeError: a bug" in caplog.text
