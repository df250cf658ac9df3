"""Phone and browser recordings are references like any other: an .m4a (AAC) or .webm (Opus) clip is
accepted whenever ffmpeg decodes it, and a file nobody can decode is refused by its own name, never by
the app's private upload path."""
import shutil
import subprocess

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
FAST = {"steps": 4, "randomize": False, "seed": 7}


@pytest.fixture
def client(running_app):
    return Client(running_app.url, verbose=False)


@pytest.mark.parametrize("suffix, codec", [(".m4a", "aac"), (".webm", "libopus")])
def test_phone_and_browser_recordings_clone(client, buzz_wav, tmp_path, suffix, codec):
    clip = tmp_path / f"phone{suffix}"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(buzz_wav("phone.wav", 4, 48000)), "-c:a", codec, str(clip)],
                   check=True)
    final = client.submit(reference=handle_file(str(clip)), transcript="A phone recording.", text="It works.",
                          **FAST, api_name="/clone").result()
    assert "Done" in final[1], final[1]


def test_an_undecodable_clip_is_named_without_internal_paths(running_app, client, tmp_path):
    clip = tmp_path / "voice-memo.m4a"
    clip.write_bytes(b"this is not audio " * 200)
    with pytest.raises(AppError) as err:
        client.predict(reference=handle_file(str(clip)), transcript="x", text="Hello.", **FAST, api_name="/clone")
    message = str(err.value)
    assert "voice-memo.m4a could not be read as audio" in message, message
    assert "ffmpeg" in message, message
    for private in ("/tmp", "gradio", str(running_app.home), str(tmp_path)):
        assert private not in message, message
