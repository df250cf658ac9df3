"""The server the API benches measure (tools/bench_api.py, bench_clients.py, bench_answer.py): `launcher.py serve`
started in a throwaway data folder, with the checkpoint and mode of their options (tools/model_options.py)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`launcher.py serve *options` with its folders in `home`, on a free port, until the block ends; its terminal
    output goes to home/serve-PORT.log."""

    def __init__(self, home: Path, options: list[str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / f"serve-{self.port}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen([sys.executable, "launcher.py", "serve", "--port", str(self.port), *options],
                                         cwd=ROOT, env={**os.environ, "VOICEDESK_HOME": str(home)}, stdout=out,
                                         stderr=subprocess.STDOUT)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(30)

    def until(self, answers: Callable[[], object]) -> None:
        """Call `answers` each second until it returns without an HTTP error: the model loads after the server
        listens (the connection is refused, then 503 "model_not_ready"). A refusal of the request itself (4xx) is
        raised at once, as the server's exit is (with its last output): waiting would not change either."""
        while True:
            assert self.proc.poll() is None, f"the server exited:\n{self.log.read_text()[-2000:]}"
            try:
                answers()
                return
            except httpx.HTTPStatusError as err:
                if err.response.status_code < 500:
                    raise
            except httpx.TransportError:
                pass
            time.sleep(1)

    def says(self, line: str, timeout_s: float = 900) -> None:
        """Wait until the server's output has `line`."""
        deadline = time.monotonic() + timeout_s
        while line not in self.log.read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()[-2000:]
            time.sleep(0.5)
