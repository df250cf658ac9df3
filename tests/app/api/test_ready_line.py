"""`voicedesk serve` has no page to show the model's load: its terminal says when the model is ready, and from then
on a speech request is answered (before, it gets 503 "model_not_ready")."""
import httpx
from served import serving


def test_serve_says_when_the_model_is_ready_and_then_answers(tmp_path):
    with serving(tmp_path, ["--demo"], ready=lambda port, log: "The model is ready: " in log,
                 settings='{"steps": 4}') as (port, _, _, _):
        body = {"model": "tts-1", "voice": "alloy", "input": "Ready now.", "response_format": "pcm"}
        response = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", json=body, timeout=300)
        assert response.status_code == 200 and response.content, response.text
