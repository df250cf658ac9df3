"""tools/bench_clients's reading of the server's Server-Timing header and its per-client rows (no server)."""
from types import SimpleNamespace

from app.api.speech import SpeechStream
from tools.bench_clients import row, server_timing


def test_server_timing_reads_the_header_the_api_sends():
    stream = SimpleNamespace(submitted_at=10.002, job=SimpleNamespace(started_at=10.0045), first_part_at=10.1)
    header = SpeechStream.server_timing(stream, received_at=10.0)
    spans = server_timing(header)
    assert list(spans) == ["accept", "queue", "engine", "handoff"]
    assert spans["accept"] == 2.0 and spans["queue"] == 2.5 and spans["engine"] == 95.5
    assert spans["handoff"] >= 0


def test_server_timing_without_a_header_or_durations():
    assert server_timing(None) == {}
    assert server_timing("cache, miss;desc=x") == {}


def test_row_says_when_each_client_sent_its_request_within_its_round():
    def client(start, spans):
        return {"start": start, "first_s": 0.1, "end": start + 1.0, "audio_s": 2.0, "server_ms": spans}

    rounds = [[client(5.0, {"engine": 90.0}), client(5.004, {"engine": 300.0})], [client(9.001, {}), client(9.0, {})]]
    r = row(2, rounds)
    assert r["sent_ms"] == [0.0, 4.0, 1.0, 0.0]
    assert r["server_ms"] == [{"engine": 90.0}, {"engine": 300.0}, {}, {}]
