"""Issue 23 on this CPU: where a streamed first piece's time goes before its batch starts, 1 and 8 requests at once.

    PYTHONPATH=. python docs/bench/cpu-issue23-prepare-20261206.py [--rounds 5] [--normalize on,off] [--steps 8]

The demo server (`launcher.py serve --demo`, tools/bench_server.Server, random weights) gets bench_clients' paragraph
from 1 and then 8 threads at once (seeds apart), `rounds` times for each setting of `normalize` (the request's
field: WeTextProcessing's text normalisation, done for all streams in one child process), the settings alternated
round by round. Per setting and number of clients: the median (max) of each Server-Timing span of the engine's way to
the first batch (text, plan, batch_wait, prepare), of accept and queue before it, of generate, decode and engine, and
`rest` = engine - text - prepare - generate - decode (the job's start until its engine call, the first part's finish
and handing on). The load average of the machine is printed before and after (other programs share its cores).
Its client threads are api_bench.py's, beside it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
from pathlib import Path

import httpx
from api_bench import at_once

from tools.bench_clients import PARAGRAPH, server_timing
from tools.bench_server import Server

SPANS = ("accept", "queue", "text", "plan", "batch_wait", "prepare", "generate", "decode", "engine", "rest")


def spans_of(url: str, seed: int, normalize: bool, steps: int, start: threading.Barrier) -> dict[str, float]:
    """One client: its first part's spans."""
    body = {"model": "tts-1", "voice": "alloy", "input": PARAGRAPH, "response_format": "pcm", "seed": seed,
            "normalize": normalize, "steps": steps}
    with httpx.Client(timeout=600) as client:
        start.wait()
        with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
            response.raise_for_status()
            spans = server_timing(response.headers.get("server-timing"))
            for _ in response.iter_raw():
                pass
    inside = ("text", "prepare", "generate", "decode")
    return spans | {"rest": spans["engine"] - sum(spans[name] for name in inside)}


def one_round(url: str, clients: int, seed: int, normalize: bool, steps: int) -> list[dict]:
    return at_once(clients, lambda i, start: spans_of(url, seed + i, normalize, steps, start))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--normalize", default="on,off")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    settings = [value == "on" for value in args.normalize.split(",")]
    print(f"load average before: {os.getloadavg()}, {os.cpu_count()} cores")
    with Server(Path(tempfile.mkdtemp(prefix="prepare-")), ["--demo"]) as server:
        server.until(lambda: one_round(server.url, 1, 0, True, args.steps))
        for normalize in settings:  # warm: the normalisation child and the batch shapes of 8
            one_round(server.url, 8, 0, normalize, args.steps)
        results = {(normalize, n): [] for normalize in settings for n in (1, 8)}
        for k in range(args.rounds):
            for normalize in settings:
                for n in (1, 8):
                    results[normalize, n] += one_round(server.url, n, 100 * k, normalize, args.steps)
    print(f"load average after: {os.getloadavg()}")
    print(f"{args.rounds} rounds, {args.steps} steps; median (max) ms of every client of every round")
    print("| normalize | clients | " + " | ".join(SPANS) + " |")
    print("|---|---|" + "---|" * len(SPANS))
    for (normalize, n), spans in results.items():
        cells = [f"{statistics.median(s[name] for s in spans):.1f} ({max(s[name] for s in spans):.1f})"
                 for name in SPANS]
        print(f"| {'on' if normalize else 'off'} | {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
