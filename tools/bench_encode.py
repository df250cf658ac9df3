"""How fast each way of encoding the API's audio hands over a first chunk: PyAV in the process
(app/encoder_av.py) against the ffmpeg command line fed through pipes, per response format (the app
itself writes pcm and wav with numpy alone: app/pcm_writer.py).

    python -m tools.bench_encode [--chunk-s 1.5] [--runs 5]

For the command line two figures: started when the chunk arrives (start-up included), and started
ahead of time (only pipe and codec latency); plus the share of the chunk's encoded bytes that came
out within 0.3 s while the stream stayed open (what a client could play before the next chunk).
"""
from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import threading
import time

import numpy as np

from app.encoder import FORMATS
from app.encoder_av import AvEncoder
from engine.constants import SAMPLE_RATE

SETTLE_S = 0.3


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return np.round(8000 * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def pyav_first_bytes(fmt: str, pcm: np.ndarray) -> tuple[float, int]:
    start = time.perf_counter()
    encoder = AvEncoder(FORMATS[fmt], SAMPLE_RATE)
    data = encoder.encode(pcm)
    elapsed = time.perf_counter() - start
    encoder.finish()
    return elapsed, len(data)


def cli_command(fmt: str) -> list[str]:
    spec = FORMATS[fmt]
    rate = ["-b:a", str(spec.bit_rate)] if spec.bit_rate else []
    muxer = [arg for key, value in spec.options.items() for arg in (f"-{key}", value)]
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-probesize", "32", "-analyzeduration", "0",
            "-f", "s16le", "-ar", str(SAMPLE_RATE), "-ac", "1", "-i", "pipe:0",
            "-c:a", spec.codec, *rate, *muxer, "-flush_packets", "1", "-f", spec.muxer, "pipe:1"]


def cli_first_bytes(fmt: str, pcm: np.ndarray, started_ahead: bool) -> tuple[float, int]:
    """(seconds to the first output byte, bytes out within SETTLE_S) with stdin left open."""
    start = time.perf_counter()
    proc = subprocess.Popen(cli_command(fmt), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    arrivals: queue.Queue = queue.Queue()

    def read() -> None:
        while data := os.read(proc.stdout.fileno(), 1 << 16):
            arrivals.put((time.perf_counter(), len(data)))

    threading.Thread(target=read, daemon=True).start()
    if started_ahead:
        time.sleep(1.0)  # let it start
        start = time.perf_counter()
    proc.stdin.write(pcm.tobytes())
    first, size = arrivals.get(timeout=10)
    deadline = first + SETTLE_S
    while (left := deadline - time.perf_counter()) > 0:
        try:
            size += arrivals.get(timeout=left)[1]
        except queue.Empty:
            break
    proc.stdin.close()
    proc.wait()
    return first - start, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-s", type=float, default=1.5, help="seconds of audio in the first chunk")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    pcm = tone(args.chunk_s)
    print(f"first chunk {args.chunk_s} s, median of {args.runs} runs (ms; share = bytes out before the next chunk)")
    print(f"{'format':6s} {'PyAV':>7s} {'CLI cold':>9s} {'CLI warm':>9s} {'CLI share':>10s}")
    for fmt in FORMATS:
        pyav = [pyav_first_bytes(fmt, pcm) for _ in range(args.runs)]
        cold = [cli_first_bytes(fmt, pcm, False) for _ in range(args.runs)]
        warm = [cli_first_bytes(fmt, pcm, True) for _ in range(args.runs)]
        full = statistics.median(n for _, n in pyav)
        share = statistics.median(n for _, n in warm) / full
        ms = [1e3 * statistics.median(t for t, _ in runs) for runs in (pyav, cold, warm)]
        print(f"{fmt:6s} {ms[0]:7.1f} {ms[1]:9.1f} {ms[2]:9.1f} {share:9.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
