"""Where a short piece's codec decode spends its time on a GPU: the host's launches against the device's work.

    python -m tools.probe_decode_host --model FULL --json OUT [--frames 62 150]

Per piece length: one eager `queue_decode` (host ms until it returns, ms until its waves are read, device ms between
events around it); eight queued in a row by one thread, then read (when each is ready); eight threads queueing under
one lock and reading after it, as Engine._decode_pieces does (when each is ready, sorted); the eight batched in one
decode; one decode captured in a CUDA graph and replayed (capture ms, host ms of a replay, ms until read, the largest
difference to the eager waves); and a profile of one eager decode (kernels, launch calls, the ops with the most host
time). Issue 23: eight streams' first pieces decoded one after another (BENCHMARKS.md 2026-12-06, third session).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from engine.codec import AudioCodec

ROUNDS = 20  # timed repeats of a single decode
TEAM = 8  # pieces in the row, the threads, the batch


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def one_eager(codec: AudioCodec, codes: torch.Tensor) -> dict:
    host, total, device = [], [], []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        queued = codec.queue_decode([codes])
        end.record()
        t1 = time.perf_counter()
        queued.waves()
        total.append((time.perf_counter() - t0) * 1e3)
        host.append((t1 - t0) * 1e3)
        device.append(start.elapsed_time(end))
    return {"host_ms": median_ms(host), "total_ms": median_ms(total), "device_ms": median_ms(device)}


def in_a_row(codec: AudioCodec, pieces: list[torch.Tensor]) -> dict:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    queued = [codec.queue_decode([codes]) for codes in pieces]
    queued_ms = (time.perf_counter() - t0) * 1e3
    ready = []
    for decode in queued:
        decode.waves()
        ready.append(round((time.perf_counter() - t0) * 1e3, 2))
    return {"queued_ms": round(queued_ms, 2), "ready_ms": ready}


def in_threads(codec: AudioCodec, pieces: list[torch.Tensor]) -> list[float]:
    lock, barrier, ready = threading.Lock(), threading.Barrier(len(pieces) + 1), [0.0] * len(pieces)

    def decode(i: int) -> None:
        barrier.wait()
        with lock, torch.inference_mode():
            queued = codec.queue_decode([pieces[i]])
        queued.waves()
        ready[i] = time.perf_counter()

    threads = [threading.Thread(target=decode, args=(i,)) for i in range(len(pieces))]
    for thread in threads:
        thread.start()
    torch.cuda.synchronize()
    barrier.wait()
    t0 = time.perf_counter()
    for thread in threads:
        thread.join()
    return sorted(round((t - t0) * 1e3, 2) for t in ready)


def batched(codec: AudioCodec, pieces: list[torch.Tensor]) -> dict:
    host, total = [], []
    for _ in range(ROUNDS // 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        queued = codec.queue_decode(pieces)
        host.append((time.perf_counter() - t0) * 1e3)
        queued.waves()
        total.append((time.perf_counter() - t0) * 1e3)
    return {"host_ms": median_ms(host), "total_ms": median_ms(total)}


def graphed(codec: AudioCodec, codes: torch.Tensor) -> dict:
    static = codes.clone()
    graph = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()
    with torch.cuda.graph(graph), torch.inference_mode():  # with its entry's device sync and cache emptying
        (wave,), _ = codec.decode_unchecked([static])
    capture_ms = (time.perf_counter() - t0) * 1e3
    host, total = [], []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        out = wave.to("cpu", non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        host.append((time.perf_counter() - t0) * 1e3)
        done.synchronize()
        total.append((time.perf_counter() - t0) * 1e3)
    eager = codec.queue_decode([codes]).waves()[0]
    return {"capture_ms": round(capture_ms, 2), "host_ms": median_ms(host), "total_ms": median_ms(total),
            "max_abs_diff": float((out.float() - eager).abs().max())}


def profiled(codec: AudioCodec, codes: torch.Tensor) -> dict:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        codec.queue_decode([codes]).waves()
    events = prof.key_averages()
    launches = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")
    by_host = sorted(events, key=lambda e: -e.self_cpu_time_total)[:18]
    return {"kernels": sum(e.count for e in events if e.device_type.name == "CUDA"),
            "launches": sum(e.count for e in events if e.key in launches),
            "top_host_ms": [(e.key, e.count, round(e.self_cpu_time_total / 1e3, 3)) for e in by_host]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a checkpoint folder (tools.make_checkpoint --full)")
    parser.add_argument("--frames", type=int, nargs="+", default=[62, 150])
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("probe_decode_host needs a CUDA GPU", file=sys.stderr)
        return 2
    codec = AudioCodec.load(Path(args.model) / "audio_tokenizer", "cuda")
    codec.warm_up()
    generator = torch.Generator().manual_seed(0)
    results = {}
    for frames in args.frames:
        pieces = [torch.randint(0, codec.codebook_size, (codec.num_codebooks, frames), generator=generator).cuda()
                  for _ in range(TEAM)]
        for _ in range(5):  # every kernel loaded, the allocator warm
            codec.queue_decode([pieces[0]]).waves()
        results[frames] = {"one": one_eager(codec, pieces[0]), "in_a_row": in_a_row(codec, pieces),
                           "threads": [in_threads(codec, pieces) for _ in range(5)],
                           "batched": batched(codec, pieces), "graph": graphed(codec, pieces[0]),
                           "profile": profiled(codec, pieces[0])}
        print(frames, json.dumps(results[frames]), flush=True)
    args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
