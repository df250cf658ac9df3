"""tools/bench_server.Server.until: waits while the model loads, not when the request itself is refused."""
from __future__ import annotations

import httpx
import pytest

from tools import bench_server
from tools.bench_server import Server

URL = "http://127.0.0.1:1/v1/audio/speech"


class Running:
    def __init__(self, exit_code: int | None = None):
        self.exit_code = exit_code

    def poll(self) -> int | None:
        return self.exit_code


def server(tmp_path, exit_code: int | None = None) -> Server:
    made = Server.__new__(Server)  # no process: `until` only asks whether it still runs
    made.proc = Running(exit_code)
    made.log = tmp_path / "serve.log"
    made.log.write_text("loading the model\n")
    return made


def status_error(code: int) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", URL)
    return httpx.HTTPStatusError(f"{code}", request=request, response=httpx.Response(code, request=request))


def answers_after(errors: list[Exception]):
    calls = []

    def answers() -> None:
        calls.append(1)
        if errors:
            raise errors.pop(0)
    return answers, calls


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(bench_server.time, "sleep", lambda _s: None)


def test_waits_while_refused_connections_and_503_come(tmp_path):
    answers, calls = answers_after([httpx.ConnectError("refused"), status_error(503), status_error(500)])
    server(tmp_path).until(answers)
    assert len(calls) == 4


@pytest.mark.parametrize("code", [400, 404, 422, 499])
def test_a_refused_request_is_raised_at_once(tmp_path, code):
    answers, calls = answers_after([status_error(code)])
    with pytest.raises(httpx.HTTPStatusError) as raised:
        server(tmp_path).until(answers)
    assert raised.value.response.status_code == code and len(calls) == 1


def test_an_exited_server_is_told_with_its_output(tmp_path):
    answers, calls = answers_after([])
    with pytest.raises(AssertionError, match="the server exited:\nloading the model"):
        server(tmp_path, exit_code=1).until(answers)
    assert calls == []
