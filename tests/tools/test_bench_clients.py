"""tools/bench_clients's reading of the server's Server-Timing header and its per-client rows (no server)."""
import json
import threading
from types import SimpleNamespace

import httpx
import pytest

from app.api.speech import SpeechStream
from tools import bench_clients
from tools.bench_clients import row, server_timing, spans_table


def test_server_timing_reads_the_header_the_api_sends():
    first = SimpleNamespace(generate_s=0.0625, decode_s=0.025)  # the engine's Timings of the first part
    stream = SimpleNamespace(submitted_at=10.002, job=SimpleNamespace(started_at=10.0045), first_part_at=10.1,
                             first_timings=first)
    header = SpeechStream.server_timing(stream, received_at=10.0)
    spans = server_timing(header)
    assert list(spans) == ["accept", "queue", "engine", "handoff", "generate", "decode"]
    assert spans["accept"] == 2.0 and spans["queue"] == 2.5 and spans["engine"] == 95.5
    assert spans["generate"] == 62.5 and spans["decode"] == 25.0
    assert spans["handoff"] >= 0


def test_server_timing_before_the_first_part():
    stream = SimpleNamespace(submitted_at=10.002, job=SimpleNamespace(started_at=None), first_part_at=None,
                             first_timings=None)
    assert list(server_timing(SpeechStream.server_timing(stream, received_at=10.0))) == ["accept"]


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


def test_each_client_is_made_before_the_round_starts_its_clock(monkeypatch):
    """Making an httpx.Client builds an SSL context (~18 ms of CPU under the GIL, ~80-150 ms for 8 at once): made
    after t0 it counted in the first audio the client measured, before its request was even sent."""
    events = []
    made = httpx.Client.__init__
    one_sample = httpx.MockTransport(lambda request: httpx.Response(200, stream=httpx.ByteStream(b"\0\0")))

    def recording_init(self, *args, **kwargs):
        events.append("client")
        made(self, *args, **{**kwargs, "transport": one_sample})

    monkeypatch.setattr(httpx.Client, "__init__", recording_init)
    monkeypatch.setattr(bench_clients, "time", SimpleNamespace(perf_counter=lambda: events.append("clock") or 0.0))
    results = bench_clients.one_round("http://server.test", clients=2, steps=None, seed=0)
    assert [r["audio_s"] for r in results] == [1 / 24_000] * 2
    last_client = max(i for i, event in enumerate(events) if event == "client")
    assert events.count("client") == 2 and events.index("clock") > last_client


def test_the_table_shows_the_servers_gpu_memory_per_row_and_a_dash_without_a_reading():
    def rounds(first_s):
        return [[{"start": 0.0, "first_s": first_s, "end": 1.0, "audio_s": 10.0, "server_ms": {}}]]

    text = bench_clients.table([row(1, rounds(0.05), server_gpu_gib=None), row(8, rounds(0.1), server_gpu_gib=3.5)])
    lines = text.splitlines()
    assert lines[0].endswith("| server GPU GiB |") and lines[1].count("|") == 8
    assert lines[2].endswith("| 1.00 | - |") and lines[3].endswith("| 2.00 | 3.50 |")


def test_the_spans_table_gives_each_spans_median_and_max_per_number_of_clients():
    rows = [{"clients": 1, "server_ms": [{"accept": 1.0, "engine": 50.0}]},
            {"clients": 2, "server_ms": [{"accept": 2.0, "generate": 90.0, "engine": 100.0},
                                         {"accept": 8.0, "generate": 110.0, "engine": 140.0},
                                         {"accept": 3.0, "generate": 95.0, "engine": 120.0}]}]
    lines = spans_table(rows).splitlines()
    assert lines[0] == "| clients | accept ms | queue ms | generate ms | decode ms | engine ms | handoff ms |"
    assert lines[2] == "| 1 | 1.0 (1.0) | - | - | - | 50.0 (50.0) | - |"
    assert lines[3] == "| 2 | 3.0 (8.0) | - | 95.0 (110.0) | - | 120.0 (140.0) | - |"


def test_staggered_clients_each_wait_their_turn_after_the_common_start_and_before_their_clock(monkeypatch):
    """--stagger-ms 15: client i (seed + i) sleeps 15 ms * i once every client is ready, then starts its clock and
    sends; client 0 does not sleep."""
    lock = threading.Lock()
    events = []  # (thread, event, value)

    def record(event, value=None):
        with lock:
            events.append((threading.get_ident(), event, value))

    def answer(request):
        record("send", json.loads(request.content)["seed"])
        return httpx.Response(200, stream=httpx.ByteStream(b"\0\0"))

    made = httpx.Client.__init__
    monkeypatch.setattr(httpx.Client, "__init__",
                        lambda self, *a, **kw: made(self, *a, **{**kw, "transport": httpx.MockTransport(answer)}))
    monkeypatch.setattr(bench_clients, "time", SimpleNamespace(perf_counter=lambda: record("clock") or 0.0,
                                                                sleep=lambda s: record("sleep", s)))
    bench_clients.one_round("http://server.test", clients=3, steps=None, seed=40, stagger_ms=15)
    by_thread = {}
    for thread, event, value in events:
        by_thread.setdefault(thread, []).append((event, value))
    # each client's events up to its send (its seed), in the order of the seeds
    until_sent = [evs[:[event for event, _ in evs].index("send") + 1] for evs in by_thread.values()]
    seen = sorted(until_sent, key=lambda evs: evs[-1][1])
    assert [evs[-1][1] for evs in seen] == [40, 41, 42]
    assert [[event for event, _ in evs[:-1] if event != "clock"] for evs in seen] == [[], ["sleep"], ["sleep"]]
    assert [evs[0][1] for evs in seen[1:]] == pytest.approx([0.015, 0.030])
    assert all(evs[-2][0] == "clock" for evs in seen)  # the clock starts after the sleep, right before the send


def test_the_stagger_is_kept_in_each_row_and_said_above_the_tables():
    rounds = [[{"start": 0.0, "first_s": 0.1, "end": 1.0, "audio_s": 2.0, "server_ms": {}}]]
    assert row(1, rounds)["stagger_ms"] == 0.0 and row(1, rounds, stagger_ms=15)["stagger_ms"] == 15
    assert "all at once" in bench_clients.header("hifi", 3, 0.0, None)
    assert "15 ms * i" in bench_clients.header("hifi", 3, 15.0, 2.5)


def test_main_staggers_the_warm_up_and_every_measured_round_and_writes_it_to_the_json(monkeypatch, tmp_path, capsys):
    class FakeServer:
        url = "http://server.test"
        proc = SimpleNamespace(pid=1)

        def __init__(self, home, options):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def until(self, answers):
            answers()

    staggers = []

    def fake_round(url, clients, steps, seed, stagger_ms=0.0):
        staggers.append((clients, stagger_ms))
        return [{"start": 0.0, "first_s": 0.1, "end": 1.0, "audio_s": 2.0, "server_ms": {}}] * clients

    monkeypatch.setattr(bench_clients, "Server", FakeServer)
    monkeypatch.setattr(bench_clients, "one_round", fake_round)
    monkeypatch.setattr(bench_clients, "process_gpu_gib", lambda pid: None)
    out = tmp_path / "rows.json"
    assert bench_clients.main(["--demo", "--clients", "1,2", "--rounds", "2", "--stagger-ms", "15",
                               "--json", str(out)]) == 0
    assert staggers == [(1, 0.0), (2, 15.0), (1, 15.0), (1, 15.0), (2, 15.0), (2, 15.0)]
    assert [r["stagger_ms"] for r in json.loads(out.read_text())] == [15.0, 15.0]
    assert "15 ms * i" in capsys.readouterr().out
