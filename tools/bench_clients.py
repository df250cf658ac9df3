"""Concurrent streaming API clients: what the worker's continuous batching gives several clients at once.

    python -m tools.bench_clients [--demo | --model PATH] [--mode hifi] [--clients 1,2,4,8] [--rounds 3]
        [--stagger-ms 0] [--processes]

Starts `launcher.py serve` in a throwaway data folder; for each number of clients N, `rounds` times, N
clients send the same paragraph at the same moment (different seeds) and read the streamed PCM; with --stagger-ms MS,
client i sends MS * i after the others are ready instead (real clients arrive apart: the late ones join a batch that
is already running). The clients are threads of this one process (sharing its GIL), or with --processes each a
process of its own, as real clients are (the line above the tables says which). Per N:
the total audio seconds delivered per wall second (from the round's start to its last byte) against one
client's, and each client's first audio byte (p50, p90 over every client of every round) against a lone
client's. The worker runs compatible requests side by side and the engine batches their pieces
(engine/gather.py); before that, each waited for the one before it. The JSON rows also hold, per client, when it
sent its request after the round's first client did (`sent_ms`) and the server's Server-Timing spans (`server_ms`:
accept, queue, engine = the job's start until its first part, handoff; and within engine the first part's text
(the stream's text prepared for it), prepare (its plan, then its batch_wait), generate and decode; printed as a
second table, median and max): whether a late first audio waited at the server's door, in the worker's line, for its
text, for a batch or for its decode; and the time outside the server (`outside ms`: the first audio
minus accept, queue, engine and handoff, the spans that follow one another from the request's arrival to its first
audio's send: the time in the client and on the socket). GPU memory (tools/process_gpu_memory.py: all the server process
holds, which never shrinks, so each reading is its peak so far; "-" without nvidia-smi): once loaded, before the
warm-up round of the most clients, and after each N's rounds (`server_gpu_gib`): what more clients added.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.dummy
import queue
import statistics
import tempfile
import threading
import time
import traceback
from pathlib import Path

import httpx

from tools.bench_server import Server
from tools.model_options import add_model_options, model_options
from tools.process_gpu_memory import process_gpu_gib

SAMPLE_RATE = 24_000  # the PCM the API streams: int16 mono at the engine's rate
PARAGRAPH = " ".join(["Streaming lets a listener hear the first sentence while the rest is still being made.",
                      "Every later sentence is generated while the earlier ones play.",
                      "A long answer from a chat assistant is a typical case."] * 3)


def server_timing(header: str | None) -> dict[str, float]:
    """A Server-Timing header's spans, {name: ms}: "accept;dur=1.20, queue;dur=0.50" gives {"accept": 1.2, ...}."""
    spans = {}
    for entry in (header or "").split(","):
        name, _, params = entry.strip().partition(";")
        duration = next((p.strip()[4:] for p in params.split(";") if p.strip().startswith("dur=")), None)
        if name and duration is not None:
            spans[name] = float(duration)
    return spans


def stream(url: str, text: str, seed: int, steps: int | None, start: threading.Barrier, delay_s: float = 0.0) -> dict:
    """One client's request, sent delay_s after every client of the round is ready (`start`: of threads, or of
    processes, multiprocessing's Barrier being a threading.Barrier): first byte, last byte, audio (its first byte
    counted from its own send, not the round's).
    Its clock is time.perf_counter: clock_gettime(CLOCK_MONOTONIC) on Linux (time.get_clock_info), one clock for
    every process of the machine, so `row` may compare the starts and ends of clients in different processes.
    Its httpx.Client is made before the round starts: making one builds an SSL context (~18 ms of CPU, held under
    the GIL, so 8 at once took ~80-150 ms), which httpx.stream() would do after t0 and before sending."""
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm", "seed": seed}
    if steps:
        body["steps"] = steps
    with httpx.Client(timeout=600) as client:
        start.wait()
        if delay_s:
            time.sleep(delay_s)
        t0 = time.perf_counter()
        first, size = None, 0
        with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
            response.raise_for_status()
            spans = server_timing(response.headers.get("server-timing"))
            for piece in response.iter_raw():
                if first is None and piece:
                    first = time.perf_counter() - t0
                size += len(piece)
    return {"start": t0, "first_s": first, "end": time.perf_counter(), "audio_s": size / 2 / SAMPLE_RATE,
            "server_ms": spans}


def run_client(i: int, request: dict, start: threading.Barrier, answers) -> None:
    """Client i of a round, a thread or a process: (i, its stream's result) onto `answers`, or (i, what went wrong)
    as text, since not every exception pickles."""
    try:
        answers.put((i, stream(**request, start=start)))
    except BaseException:
        start.abort()  # the others stop waiting for a client that will not come
        answers.put((i, traceback.format_exc()))


def one_round(url: str, clients: int, steps: int | None, seed: int, stagger_ms: float = 0.0,
              processes: bool = False) -> list[dict]:
    """`clients` requests at once, or client i stagger_ms * i after the common start: each client a thread of this
    process, or with `processes` a process of its own, started and its httpx.Client made before the common start."""
    # multiprocessing.dummy: the same Process, Barrier and Queue, made of threads
    context = multiprocessing.get_context("spawn") if processes else multiprocessing.dummy
    start, answers = context.Barrier(clients), context.Queue()
    requests = [{"url": url, "text": PARAGRAPH, "seed": seed + i, "steps": steps, "delay_s": i * stagger_ms / 1e3}
                for i in range(clients)]
    workers = [context.Process(target=run_client, args=(i, request, start, answers))
               for i, request in enumerate(requests)]
    for worker in workers:
        worker.start()
    answered = {}
    while len(answered) < clients:
        try:
            i, answer = answers.get(timeout=1.0)
            answered[i] = answer
        except queue.Empty:  # a process killed (its exit code negative) answers nothing
            for i, worker in enumerate(workers):
                if i not in answered and worker.exitcode not in (None, 0):
                    start.abort()
                    answered[i] = f"its process exited with code {worker.exitcode}"
    for worker in workers:
        worker.join()
    failed = [f"client {i}: {answer}" for i, answer in sorted(answered.items()) if isinstance(answer, str)]
    if failed:
        raise RuntimeError("\n".join(failed))
    return [answered[i] for i in range(clients)]


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def row(clients: int, rounds: list[list[dict]], server_gpu_gib: float | None = None, stagger_ms: float = 0.0,
        processes: bool = False) -> dict:
    audio = sum(r["audio_s"] for rs in rounds for r in rs)
    wall = sum(max(r["end"] for r in rs) - min(r["start"] for r in rs) for rs in rounds)
    firsts = [r["first_s"] for rs in rounds for r in rs]
    sent = [round(1e3 * (r["start"] - min(q["start"] for q in rs)), 2) for rs in rounds for r in rs]
    return {"clients": clients, "stagger_ms": stagger_ms, "rounds": len(rounds), "audio_s": audio, "wall_s": wall,
            "audio_per_s": audio / wall, "first_p50_s": statistics.median(firsts), "first_p90_s": p90(firsts),
            "first_s": firsts,  # each client's, round after round: a cold first round shows here
            "sent_ms": sent, "server_ms": [r["server_ms"] for rs in rounds for r in rs],
            "server_gpu_gib": server_gpu_gib,
            "clients_as": "processes" if processes else "threads"}  # a row without it (before --processes): threads


def header(mode: str, rounds: int, stagger_ms: float, loaded_gib: float | None, processes: bool = False) -> str:
    """The line above the tables: what every row shares."""
    arrival = "all at once" if not stagger_ms else f"client i sent {stagger_ms:g} ms * i after the first"
    made = "a process each (spawn)" if processes else "threads of one process"
    return (f"mode {mode}, response_format pcm, {len(PARAGRAPH)} characters per client, {rounds} rounds, {arrival}, "
            f"clients {made}; "
            f"server GPU GiB once loaded (one client served): {'-' if loaded_gib is None else f'{loaded_gib:.2f}'}")


def table(rows: list[dict]) -> str:
    one = rows[0]
    lines = ["| clients | audio s per s | x one client | first audio p50 ms | p90 ms | p90 x lone client "
             "| server GPU GiB |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        gib = r["server_gpu_gib"]
        lines.append(f"| {r['clients']} | {r['audio_per_s']:.1f} | {r['audio_per_s'] / one['audio_per_s']:.2f} | "
                     f"{1e3 * r['first_p50_s']:.0f} | {1e3 * r['first_p90_s']:.0f} | "
                     f"{r['first_p90_s'] / one['first_p90_s']:.2f} | {'-' if gib is None else f'{gib:.2f}'} |")
    return "\n".join(lines)


# the API's Server-Timing, in its order of time (a span after those inside it)
SPANS = ("accept", "queue", "text", "plan", "batch_wait", "prepare", "generate", "decode", "engine", "handoff")
SUCCESSIVE = ("accept", "queue", "engine", "handoff")  # one after another (text ... decode lie inside engine)


def outside_ms(first_s: float, spans: dict[str, float]) -> float | None:
    """A client's first audio minus its successive server spans, ms: the time in the client and on the socket (its
    send until the server received the request, the first audio's send until the client read it); None without one
    of the spans."""
    if any(name not in spans for name in SUCCESSIVE):
        return None
    return 1e3 * first_s - sum(spans[name] for name in SUCCESSIVE)


def median_max(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({max(values):.1f})" if values else "-"


def spans_table(rows: list[dict]) -> str:
    """Where each N's first audio went: every client's Server-Timing span, then its time outside the server, median
    (max) ms; "-" where no client had that span (a server without it)."""
    names = [*SPANS, "outside"]
    lines = ["| clients | " + " | ".join(f"{name} ms" for name in names) + " |", "|---|" + "---|" * len(names)]
    for r in rows:
        cells = [median_max([spans[name] for spans in r["server_ms"] if name in spans]) for name in SPANS]
        outside = [outside_ms(first, spans) for first, spans in zip(r["first_s"], r["server_ms"])]
        cells.append(median_max([ms for ms in outside if ms is not None]))
        lines.append(f"| {r['clients']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser)
    parser.add_argument("--clients", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, help="diffusion steps (default: the app's setting, 32)")
    parser.add_argument("--stagger-ms", type=float, default=0.0,
                        help="client i of a round sends its request this many ms * i after the first (default 0: "
                             "all at once)")
    parser.add_argument("--processes", action="store_true",
                        help="each client in a process of its own (spawn), as separate programs are (default: threads "
                             "of this one process, which share its GIL)")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="bench-clients-"))
    counts = [int(n) for n in args.clients.split(",")]
    with Server(home, model_options(args)) as server:
        url = server.url
        # listening and loaded: one request, its HTTP errors as they are (until retries on them)
        server.until(lambda: stream(url, PARAGRAPH, 0, args.steps, start=multiprocessing.dummy.Barrier(1)))
        loaded_gib = process_gpu_gib(server.proc.pid)
        # warm: the most clients' batches
        one_round(url, max(counts), args.steps, 0, stagger_ms=args.stagger_ms, processes=args.processes)
        rows = []
        for n in counts:
            rounds = [one_round(url, n, args.steps, 100 * k, stagger_ms=args.stagger_ms, processes=args.processes)
                      for k in range(args.rounds)]
            rows.append(row(n, rounds, server_gpu_gib=process_gpu_gib(server.proc.pid), stagger_ms=args.stagger_ms,
                            processes=args.processes))
            print(json.dumps(rows[-1]), flush=True)
    print(header(args.mode, args.rounds, args.stagger_ms, loaded_gib, processes=args.processes))
    print(table(rows))
    print(spans_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
