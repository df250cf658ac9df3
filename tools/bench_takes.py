"""What best of N costs on the GPU: N takes of one line in one batched forward (Engine.takes, the
eager model on a batch of N) against N separate renders, eager and HiFi (CUDA graphs).

    python -m tools.bench_takes [--model DIR | --random-weights] [--n 1,2,4,8] [--repeats 5]

Prints one JSON line per (workload, N) with median seconds of each way and the ratios."""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from engine.config import GenerationConfig
from engine.engine import Engine
from tools.bench_modes import ensure_random_checkpoint
from tools.workloads import select


def timed(fn, repeats: int) -> float:
    fn()  # warm: allocator, kernels, graphs for this shape
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model")
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--n", default="1,2,4,8")
    parser.add_argument("--workloads", default="en-ref3-out3,en-ref6-out10")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    model = args.model or (ensure_random_checkpoint() if args.random_weights else None)
    eager = Engine.load(model, device="cuda", mode="eager")
    hifi = Engine.load(model, device="cuda", mode="hifi")
    for w in select(args.workloads):
        voices = {e: e.voice_from_clip((w.reference(), 24000), w.ref_text) for e in (eager, hifi)}
        cfg = GenerationConfig(duration=w.duration, seed=0)
        for n in [int(x) for x in args.n.split(",")]:
            def batched():
                eager.takes(w.text, voices[eager], language=w.language, config=cfg, n=n)

            def separate(engine):
                return lambda: [engine.synthesize(w.text, voices[engine], language=w.language,
                                                  config=cfg.replace(seed=j)) for j in range(n)]

            row = {"workload": w.name, "n": n, "batched_eager_s": timed(batched, args.repeats),
                   "separate_eager_s": timed(separate(eager), args.repeats),
                   "separate_hifi_s": timed(separate(hifi), args.repeats),
                   "gpu": torch.cuda.get_device_name(), "weights": "random" if args.random_weights else model}
            row["batched_vs_separate_eager"] = row["batched_eager_s"] / row["separate_eager_s"]
            row["batched_vs_separate_hifi"] = row["batched_eager_s"] / row["separate_hifi_s"]
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
