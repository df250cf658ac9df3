"""Keeps a launched app's GPU worker busy with one long API request until the test lets it go, so that
tests about requests waiting in line get a line whatever the machine's speed (a fixed sleep lets a
fast machine finish the work before the line forms)."""
import threading

import httpx

# about 35 s on two idle cores at 64 steps with the demo checkpoint; released long before that
LONG_INPUT = "This sentence keeps the engine busy for a while, and then some more. " * 40


class BusyWorker:
    """`with BusyWorker(url, headers) as busy:` returns once the long request is generating; leaving the
    block hangs up (which stops it at its next step). `busy.running` says it is still generating."""

    def __init__(self, url: str, headers: dict | None = None):
        self._url, self._headers = url, headers or {}
        self._generating, self._release, self._ended = threading.Event(), threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    @property
    def running(self) -> bool:
        return not self._ended.is_set()

    def __enter__(self) -> "BusyWorker":
        self._thread.start()
        assert self._generating.wait(120), "the long request did not start generating"
        return self

    def __exit__(self, *exc) -> None:
        self._release.set()
        self._thread.join(120)

    def _hold(self) -> None:
        body = {"model": "tts-1", "voice": "alloy", "input": LONG_INPUT, "response_format": "pcm", "steps": 64}
        try:
            with httpx.stream("POST", f"{self._url}/v1/audio/speech", json=body, headers=self._headers,
                              timeout=120) as response:
                for _ in response.iter_bytes():  # the release is noticed at the next chunk
                    self._generating.set()
                    if self._release.is_set():
                        return
        finally:
            self._ended.set()
