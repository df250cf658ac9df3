"""A designed voice can be kept: its last result becomes a saved voice (the result as the reference, its text
as the transcript), usable from the Clone tab like any other."""
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

FAST = {"steps": 4, "randomize": False, "seed": 7}


def test_keep_a_designed_voice_and_clone_with_it(running_app):
    client = Client(running_app.url, verbose=False)
    client.submit(text="A designed voice worth keeping.", gender="female", **FAST, api_name="/design").result()
    message = client.predict(name="Designed Keeper", api_name="/save_designed_voice")[-1]
    assert "Saved the voice 'Designed Keeper'" in message, message
    voice = next(v for v in client.predict(api_name="/list_voices") if v["name"] == "Designed Keeper")
    assert voice["transcript"] == "A designed voice worth keeping.", voice
    final = client.submit(voice_slug=voice["slug"], reference=None, transcript="", text="Spoken by a kept voice.",
                          **FAST, api_name="/clone").result()
    assert "Done" in final[1], final[1]


def test_nothing_designed_yet_says_what_to_do(running_app):
    with pytest.raises(AppError, match="Generate with a described voice first"):
        Client(running_app.url, verbose=False).predict(name="Nothing Yet", api_name="/save_designed_voice")
