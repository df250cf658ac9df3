"""Time to first byte of the OpenAI-compatible API beside the engine's own time to first audio.

    python -m tools.bench_api [--demo | --model PATH] [--mode hifi] [--runs 5] [--format pcm]

Starts `launcher.py serve` in a throwaway data folder, sends a short and a long input, and reads for
each request the worker's own figure from the history it stored (from the job's start to the first
chunk, decoded). The difference is what the API adds: parsing and checks, the hand-off to the GPU
worker, encoding and HTTP. Where the server sends a Server-Timing header (app/api/speech.py), its
parts are shown too: `accept` (the request's checks until queued), `queue`, `engine` (the job's start
to its first part) and `handoff` (that part to the response's start); what is left of the first
byte is HTTP and this client.

One HTTP client serves every request, as an application's would: making one per request (httpx.stream)
builds a TLS context each time, 10-20 ms that an earlier version of this tool counted as the API's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tools.bench_server import Server
from tools.model_options import add_model_options, model_options

WORKLOADS = {
    "short": "The quick brown fox jumps over the lazy dog.",
    "long": " ".join(["Streaming lets a listener hear the first sentence while the rest is still being made.",
                      "Every later sentence is generated while the earlier ones play.",
                      "A long answer from a chat assistant is a typical case."] * 4),
}


def newest_entry(home: Path) -> dict:
    lines = (home / "data" / "history" / "index.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])


def one_request(client: httpx.Client, url: str, text: str, fmt: str,
                steps: int | None) -> tuple[float, float, dict[str, float]]:
    """(seconds to the first audio byte, seconds to the last, the server's timing in ms) of one streamed
    request."""
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": fmt, "seed": 0}
    if steps:
        body["steps"] = steps
    start = time.perf_counter()
    first = None
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for piece in response.iter_raw():
            if first is None and piece:
                first = time.perf_counter() - start
    return first, time.perf_counter() - start, server_timing(response.headers.get("server-timing", ""))


def server_timing(header: str) -> dict[str, float]:
    """`a;dur=1.5, b;dur=2` -> {"a": 1.5, "b": 2.0}."""
    parts = (item.strip().split(";dur=") for item in header.split(",") if ";dur=" in item)
    return {name: float(ms) for name, ms in parts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--format", default="pcm", help="response_format")
    parser.add_argument("--steps", type=int, help="diffusion steps (default: the app's setting, 32)")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="bench-api-"))
    with Server(home, model_options(args)) as server, httpx.Client(timeout=600) as client:
        url = server.url
        # listening and loaded: a first request is also the warm-up
        server.until(lambda: one_request(client, url, WORKLOADS["short"], args.format, args.steps))
        print(f"mode {args.mode}, {newest_entry(home)['backend']}, response_format {args.format}, "
              f"median of {args.runs} runs (ms)")
        print(f"{'input':6s} {'chars':>6s} {'API first byte':>15s} {'engine first audio':>19s} {'API adds':>9s} "
              f"{'API total':>10s} {'audio s':>8s}   server timing")
        for name, text in WORKLOADS.items():
            rows, timings = [], []
            for _ in range(args.runs):
                first, total, timing = one_request(client, url, text, args.format, args.steps)
                entry = newest_entry(home)
                rows.append((first, entry["first_audio_s"], total, entry["audio_s"]))
                timings.append(timing)
            api, engine, total, audio = (statistics.median(r[i] for r in rows) for i in range(4))
            parts = " ".join(f"{key} {statistics.median(t[key] for t in timings):.2f}"
                             for key in timings[0] if all(key in t for t in timings))
            print(f"{name:6s} {len(text):6d} {1e3 * api:15.1f} {1e3 * engine:19.1f} {1e3 * (api - engine):9.1f} "
                  f"{1e3 * total:10.1f} {audio:8.2f}   {parts or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
