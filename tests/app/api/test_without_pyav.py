"""`voicedesk serve` on a computer without PyAV (a headless GPU server, say): pcm and wav are served as ever,
and a request for a format that needs PyAV gets a 400 that says so, before anything is queued."""
import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from served import serving

ROOT = Path(__file__).resolve().parents[3]
BODY = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", "steps": 4, "seed": 3}


def lists_models(port: int, log: str) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).is_success
    except httpx.HTTPError:
        return False


@pytest.fixture
def served_without_pyav(tmp_path):
    """The API's url, with `import av` failing in the server as it does where PyAV is not installed."""
    hidden = tmp_path / "no_pyav" / "av"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'av'\", name='av')\n")
    with serving(tmp_path / "home", ["--demo"], ready=lists_models,
                 env={"PYTHONPATH": os.pathsep.join([str(hidden.parent), str(ROOT)])}) as (port, _, _, _):
        yield f"http://127.0.0.1:{port}"


def test_pcm_and_wav_are_served_without_pyav_and_mp3_says_why_not(served_without_pyav, decode_audio):
    url = served_without_pyav
    audio = {}
    for fmt in ("pcm", "wav"):
        while True:  # the model may still be loading: 503 with Retry-After
            response = httpx.post(f"{url}/v1/audio/speech", json={**BODY, "response_format": fmt}, timeout=300)
            if response.status_code != 503:
                break
            time.sleep(1)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == f"audio/{fmt}"
        audio[fmt] = decode_audio(response.content, fmt)
    assert len(audio["pcm"]) > 0
    np.testing.assert_array_equal(audio["wav"], audio["pcm"])  # the same seed: the same samples
    for fmt in ("mp3", "opus", "aac", "flac"):
        response = httpx.post(f"{url}/v1/audio/speech", json={**BODY, "response_format": fmt}, timeout=60)
        assert response.status_code == 400, (fmt, response.text)
        error = response.json()["error"]
        assert error["param"] == "response_format" and error["code"] == "unsupported_response_format"
        assert error["message"].startswith(f"{fmt} needs PyAV (pip install av), which is not installed here")
        assert "pcm and wav need nothing more" in error["message"]
