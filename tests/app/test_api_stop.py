"""Stop, through the launched app's HTTP API (gradio_client), on the tiny random checkpoint: the generation ends
early and keeps what was made. The app holds every generation after its second part until it is stopped
(held_launch.py), so Stop always finds it running, whatever the machine's speed: a Stop ignored shows as a
generation that ends on its own."""
import sys
import threading
from pathlib import Path

import pytest
import soundfile as sf
from gradio_client import Client
from held_launch import HELD_AFTER
from test_api import METRICS, STATUS, clone

HELD = (sys.executable, str(Path(__file__).with_name("held_launch.py")))
LONG_TEXT = " ".join(f"This is sentence number {i}, and it goes on for a while." for i in range(10))
PIECES = LONG_TEXT.count(".")


@pytest.fixture(scope="module")
def held_app(app_launcher, tmp_path_factory):
    with app_launcher(tmp_path_factory.mktemp("voicedesk_held"), prefix=HELD) as app:
        yield app


@pytest.fixture
def client(held_app):
    return Client(held_app.url, verbose=False)


def test_stop_in_the_middle_then_keep_working(client, reference_wav):
    job = clone(client, reference_wav, LONG_TEXT, steps=16)
    stopper = None
    for outputs in job:
        if "Generating" in str(outputs[STATUS]) and stopper is None:
            stopper = threading.Thread(target=client.predict, kwargs={"api_name": "/clone_stop"})
            stopper.start()
    stopper.join(30)
    final = job.outputs()[-1]
    assert "Stopped after" in final[STATUS], final[STATUS]
    assert final[METRICS]["chunks"] < PIECES
    assert "Done" in clone(client, reference_wav, "Working again after a stop.").result()[STATUS]


def test_stop_keeps_what_was_made(held_app, client, reference_wav):
    job = clone(client, reference_wav, LONG_TEXT)
    for outputs in job:
        if f"part {HELD_AFTER} is playing" in str(outputs[STATUS]):  # two parts made: keeping only one would show
            client.predict(api_name="/clone_stop")
            break
    final = job.result()
    assert "Stopped after" in final[STATUS] and "saved in the history" in final[STATUS], final[STATUS]
    made = final[METRICS]["audio_s"]
    assert HELD_AFTER <= final[METRICS]["chunks"] < PIECES, final[METRICS]
    entry = client.predict(api_name="/list_history")[0]
    assert entry["text"] == LONG_TEXT and entry["stopped"] is True and entry["audio_s"] == pytest.approx(made)
    stored = held_app.home / "data" / "history" / "audio" / entry["file"]  # the one stored copy
    assert made > 0 and sf.info(stored).frames == pytest.approx(made * 24000, abs=1)
