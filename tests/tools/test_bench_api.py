"""tools/bench_api.py against a real `serve` on the tiny checkpoint: both inputs reported, the API's first byte
never before the engine's first audio (the job starts after the request arrives), and the server's own timing
of the parts inside the client's time to the first byte."""
import pytest

from tools.bench_api import WORKLOADS, main, server_timing

SERVER_PARTS = ["accept", "queue", "engine", "handoff"]  # one after the other
ENGINE_PARTS = ["text", "plan", "batch_wait", "prepare", "generate", "decode"]  # the first part's, inside `engine`


def test_reports_first_byte_beside_the_engine(capsys):
    assert main(["--demo", "--runs", "1", "--steps", "4", "--mode", "eager"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[0] for row in rows] == list(WORKLOADS)
    for name, chars, api_ms, engine_ms, adds_ms, total_ms, audio_s, *timing in rows:
        assert int(chars) == len(WORKLOADS[name]) and float(audio_s) > 0
        assert 0 < float(engine_ms) <= float(api_ms) <= float(total_ms)
        assert float(adds_ms) >= 0
        parts = dict(zip(timing[::2], map(float, timing[1::2]), strict=True))
        assert list(parts) == SERVER_PARTS + ENGINE_PARTS and all(ms >= 0 for ms in parts.values())
        # the server's clock (time.time) against the client's (perf_counter): a slewing wall clock runs at most
        # 0.05 % off; the parts are printed to 0.01 ms
        assert sum(parts[name] for name in SERVER_PARTS) <= float(api_ms) * 1.0005 + 0.05
        # text, prepare (= plan + batch_wait), generate, decode: the engine's perf_counter from the stream's call to
        # the first part's decode's end, one after another
        assert parts["plan"] + parts["batch_wait"] == pytest.approx(parts["prepare"], abs=0.02)
        inside = ("text", "prepare", "generate", "decode")
        assert sum(parts[name] for name in inside) <= parts["engine"] * 1.0005 + 0.05
        assert parts["engine"] >= float(engine_ms) - 0.06  # the job starts before its generation does (0.1 ms print)


@pytest.mark.parametrize("header, parts", [
    ("accept;dur=1.25, queue;dur=0.10,engine;dur=57", {"accept": 1.25, "queue": 0.1, "engine": 57.0}),
    ("", {}), ("miss, cache;desc=x", {})])
def test_server_timing_header(header, parts):
    assert server_timing(header) == parts
