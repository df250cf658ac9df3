"""tools/bench_clients's reading of the server's Server-Timing header, its per-client rows, and its clients as
threads or processes (a fake server: httpx's MockTransport, or a plain HTTP server on this machine)."""
import json
import multiprocessing
import multiprocessing.dummy
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import httpx
import pytest

from app.api.speech import SpeechStream
from tools import bench_clients
from tools.bench_clients import outside_ms, row, server_timing, spans_table


@pytest.fixture(params=["threads", "processes"])
def in_processes(request, monkeypatch):
    """Either way of running a round's clients; the processes are threads posing as processes
    (multiprocessing.dummy) so that they see this test's fakes: a spawned process would not."""
    if request.param == "processes":
        asked = []
        monkeypatch.setattr(bench_clients.multiprocessing, "get_context",
                            lambda method: asked.append(method) or multiprocessing.dummy)
        yield True
        assert asked == ["spawn"]
    else:
        yield False


def test_server_timing_reads_the_header_the_api_sends():
    # the engine's timings of the first part: its text 2 ms, its call planned in 0.5 ms + 1.5 waiting for a batch
    first = SimpleNamespace(text_s=0.002, plan_s=0.0005, prepare_s=0.002, generate_s=0.0625, decode_s=0.025)
    stream = SimpleNamespace(submitted_at=10.002, job=SimpleNamespace(started_at=10.0045), first_part_at=10.1,
                             first_timings=first)
    header = SpeechStream.server_timing(stream, received_at=10.0)
    spans = server_timing(header)
    assert list(spans) == ["accept", "queue", "engine", "handoff", "text", "plan", "batch_wait", "prepare", "generate",
                           "decode"]
    assert spans["accept"] == 2.0 and spans["queue"] == 2.5 and spans["engine"] == 95.5
    assert spans["text"] == 2.0 and spans["plan"] == 0.5 and spans["batch_wait"] == 1.5 and spans["prepare"] == 2.0
    assert spans["generate"] == 62.5 and spans["decode"] == 25.0
    assert spans["handoff"] >= 0
    inside = ("text", "prepare", "generate", "decode")  # one after another inside engine
    assert sum(spans[name] for name in inside) <= spans["engine"]


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


def test_each_client_is_made_before_the_round_starts_its_clock(monkeypatch, in_processes):
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
    results = bench_clients.one_round("http://server.test", clients=2, steps=None, seed=0, processes=in_processes)
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
    rows = [{"clients": 1, "first_s": [0.1], "server_ms": [{"accept": 1.0, "engine": 50.0}]},
            {"clients": 2, "first_s": [0.2] * 3, "server_ms": [{"accept": 2.0, "generate": 90.0, "engine": 100.0},
                                                               {"accept": 8.0, "generate": 110.0, "engine": 140.0},
                                                               {"accept": 3.0, "generate": 95.0, "engine": 120.0}]}]
    lines = spans_table(rows).splitlines()
    assert lines[0] == ("| clients | accept ms | queue ms | text ms | plan ms | batch_wait ms | prepare ms "
                        "| generate ms | decode ms | engine ms | handoff ms | outside ms |")
    assert lines[1].count("|") == 13
    assert lines[2] == "| 1 | 1.0 (1.0) | - | - | - | - | - | - | - | 50.0 (50.0) | - | - |"
    assert lines[3] == "| 2 | 3.0 (8.0) | - | - | - | - | - | 95.0 (110.0) | - | 120.0 (140.0) | - | - |"


def test_the_time_outside_the_server_is_the_first_audio_less_the_spans_that_follow_one_another():
    """H100 19:29, 8 clients at once: first audio 165 ms, accept 8.3 + queue 1.0 + engine 137.8 + handoff 1.2 =
    148.3 on the server (generate and decode lie inside engine): 16.7 ms in the client and on the socket."""
    spans = {"accept": 8.3, "queue": 1.0, "generate": 100.0, "decode": 30.0, "engine": 137.8, "handoff": 1.2}
    assert outside_ms(0.165, spans) == pytest.approx(16.7)
    assert outside_ms(0.165, {name: ms for name, ms in spans.items() if name != "queue"}) is None
    lone = {"accept": 1.0, "queue": 0.5, "engine": 60.0, "handoff": 0.5}
    rows = [{"clients": 1, "first_s": [0.065], "server_ms": [lone]},
            {"clients": 3, "first_s": [0.165, 0.180, 0.400], "server_ms": [
                spans, {**spans, "engine": 140.0}, {"accept": 2.0}]}]  # the last one without queue: not counted
    lines = spans_table(rows).splitlines()
    assert lines[2].endswith("| 3.0 (3.0) |")
    assert lines[3].endswith("| 23.1 (29.5) |")  # 16.7 and 180 - 150.5 = 29.5: their median and max


def test_staggered_clients_each_wait_their_turn_after_the_common_start_and_before_their_clock(monkeypatch,
                                                                                               in_processes):
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
    bench_clients.one_round("http://server.test", clients=3, steps=None, seed=40, stagger_ms=15, processes=in_processes)
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


def test_the_row_and_the_line_above_the_tables_say_whether_the_clients_were_threads_or_processes():
    rounds = [[{"start": 0.0, "first_s": 0.1, "end": 1.0, "audio_s": 2.0, "server_ms": {}}]]
    assert row(1, rounds)["clients_as"] == "threads" and row(1, rounds, processes=True)["clients_as"] == "processes"
    assert "clients threads of one process;" in bench_clients.header("hifi", 3, 0.0, None)
    assert "clients a process each (spawn);" in bench_clients.header("hifi", 3, 0.0, None, processes=True)


@pytest.mark.parametrize("processes", [False, True])
def test_main_staggers_the_warm_up_and_every_measured_round_and_writes_it_to_the_json(monkeypatch, tmp_path, capsys,
                                                                                      processes):
    """The warm-up and every measured round with the stagger and the clients as asked; the readiness probe (a lone
    request until the model answers) neither."""
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

    rounds = []
    probes = []
    result = {"start": 0.0, "first_s": 0.1, "end": 1.0, "audio_s": 2.0, "server_ms": {}}

    def fake_round(url, clients, steps, seed, stagger_ms=0.0, processes=False):
        rounds.append((clients, stagger_ms, processes))
        return [result] * clients

    def fake_stream(url, text, seed, steps, start, delay_s=0.0):
        probes.append((start.parties, delay_s))
        return result

    monkeypatch.setattr(bench_clients, "Server", FakeServer)
    monkeypatch.setattr(bench_clients, "one_round", fake_round)
    monkeypatch.setattr(bench_clients, "stream", fake_stream)
    monkeypatch.setattr(bench_clients, "process_gpu_gib", lambda pid: None)
    out = tmp_path / "rows.json"
    assert bench_clients.main(["--demo", "--clients", "1,2", "--rounds", "2", "--stagger-ms", "15",
                               "--json", str(out)] + ["--processes"] * processes) == 0
    assert probes == [(1, 0.0)]
    p = processes
    assert rounds == [(2, 15.0, p), (1, 15.0, p), (1, 15.0, p), (2, 15.0, p), (2, 15.0, p)]
    rows = json.loads(out.read_text())
    assert [r["stagger_ms"] for r in rows] == [15.0, 15.0]
    assert [r["clients_as"] for r in rows] == ["processes" if processes else "threads"] * 2
    printed = capsys.readouterr().out
    assert "15 ms * i" in printed and ("a process each" in printed) == processes


@pytest.mark.timeout(60)  # a client left waiting hangs
def test_a_client_that_fails_fails_the_round_with_its_story_and_the_others_stop_waiting(monkeypatch):
    """One client's httpx.Client cannot be made: it never reaches the common start, so the others must not wait for
    it there for ever; the round's error tells each client's story."""
    made = httpx.Client.__init__
    one_sample = httpx.MockTransport(lambda request: httpx.Response(200, stream=httpx.ByteStream(b"\0\0")))
    lock, count = threading.Lock(), []

    def second_fails(self, *args, **kwargs):
        with lock:
            count.append(1)
            if len(count) == 2:
                raise OSError("no more sockets")
        made(self, *args, **{**kwargs, "transport": one_sample})

    monkeypatch.setattr(httpx.Client, "__init__", second_fails)
    with pytest.raises(RuntimeError, match="no more sockets") as failed:
        bench_clients.one_round("http://server.test", clients=3, steps=None, seed=0)
    story = str(failed.value)
    assert all(f"client {i}: Traceback" in story for i in range(3))
    assert story.count("OSError: no more sockets") == 1 and story.count("threading.BrokenBarrierError\n") == 2


class ReverseOrderServer(ThreadingHTTPServer):
    """Answers `clients` speech requests (seeds 0..clients-1) in reverse order of seed, each once the client
    before it in that order has read its answer and closed its connection: client i's audio is i + 1 samples and its
    Server-Timing's accept i ms, so that a result says whose it is."""

    def __init__(self, clients: int):
        self.turns = [threading.Event() for _ in range(clients)]
        self.turns[-1].set()
        super().__init__(("127.0.0.1", 0), self.Handler)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            seed = json.loads(self.rfile.read(int(self.headers["content-length"])))["seed"]
            assert self.server.turns[seed].wait(60)
            self.send_response(200)
            self.send_header("server-timing", f"accept;dur={seed}, queue;dur=1, engine;dur=2, handoff;dur=0.5")
            self.send_header("content-length", str(2 * (seed + 1)))
            self.end_headers()
            self.wfile.write(b"\0\0" * (seed + 1))
            self.wfile.flush()
            self.rfile.read()  # until the client closed its connection
            if seed:
                self.server.turns[seed - 1].set()

        def log_message(self, *args):
            pass


def test_clients_in_processes_of_their_own_return_each_ones_result_in_client_order_on_one_clock(monkeypatch):
    """Real spawned processes against a server on this machine that answers the last client first: the results come
    back in the clients' order, not their finishing order, none lost; their perf_counter readings lie within this
    process's before and after (CLOCK_MONOTONIC: one clock for every process of the machine, as row's wall time and
    sent_ms need)."""
    asked = []
    spawn = multiprocessing.get_context
    monkeypatch.setattr(bench_clients.multiprocessing, "get_context",
                        lambda method: asked.append(method) or spawn(method))
    assert time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    server = ReverseOrderServer(clients=3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        before = time.perf_counter()
        results = bench_clients.one_round(f"http://127.0.0.1:{server.server_address[1]}", clients=3, steps=None, seed=0,
                                          processes=True)
        after = time.perf_counter()
    finally:
        server.shutdown()
        server.server_close()
    assert asked == ["spawn"]
    assert [r["server_ms"]["accept"] for r in results] == [0.0, 1.0, 2.0]
    assert [r["audio_s"] * 24_000 for r in results] == pytest.approx([1, 2, 3])
    assert all(before < r["start"] < r["start"] + r["first_s"] <= r["end"] < after for r in results)


class KillingServer(ThreadingHTTPServer):
    """Kills every process this test process started (the round's clients) when a request comes: none answers."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), self.Handler)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            for child in multiprocessing.active_children():
                os.kill(child.pid, signal.SIGKILL)

        def log_message(self, *args):
            pass


@pytest.mark.timeout(60)  # a round that waits for the answer of a dead process hangs
def test_a_round_whose_client_processes_are_killed_says_so_instead_of_waiting_for_their_answers():
    server = KillingServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RuntimeError) as failed:
            bench_clients.one_round(f"http://127.0.0.1:{server.server_address[1]}", clients=2, steps=None, seed=0,
                                    processes=True)
    finally:
        server.shutdown()
        server.server_close()
    assert str(failed.value).count(f"its process exited with code {-signal.SIGKILL}") == 2
