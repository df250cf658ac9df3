"""What a thread's first generation costs: CUDA keeps state per thread (cuBLAS and cuDNN handles, cuDNN's
convolution plans for each shape), so the same render is timed on the thread that loaded and warmed the engine,
then on a new thread (its first and second time), then at a length no thread has decoded yet.

    python -m tools.bench_threads [--demo | --model PATH] [--mode hifi] [--repeats 3]

Why the GPU worker runs a lone job on the thread of the load and warm-up, and batches on the thread that ran
the last one (app/worker.py, engine/gather.py)."""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import torch

from engine.config import GenerationConfig
from engine.engine import Engine
from tools.model_options import add_model_options, load_engine

TEXT = "The quick brown fox jumps over the lazy dog."
OTHER = "A sentence of another length, which no thread has decoded before this moment."


def timed_render(engine: Engine, text: str) -> float:
    """Seconds of one whole render of `text` (generation and decode), on the calling thread."""
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)
    t0 = time.perf_counter()
    engine.synthesize(text, config=GenerationConfig(seed=0))
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)
    return time.perf_counter() - t0


def on_new_thread(fn):
    """fn() run on a thread of its own, started for it; its value."""
    box = []
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    thread.join()
    return box[0]


def thread_rows(engine: Engine, repeats: int) -> dict:
    """Milliseconds of the same render on the warm thread and on new threads (first, then second time each)."""
    timed_render(engine, TEXT)  # warm, on this thread
    warm = statistics.median(timed_render(engine, TEXT) for _ in range(repeats))
    firsts, seconds = [], []
    for _ in range(repeats):
        first, second = on_new_thread(lambda: (timed_render(engine, TEXT), timed_render(engine, TEXT)))
        firsts.append(first)
        seconds.append(second)
    new_length = timed_render(engine, OTHER)  # a new length on the warm thread: new convolution shapes
    again = timed_render(engine, OTHER)
    return {"warm_thread_ms": 1e3 * warm, "new_thread_first_ms": 1e3 * statistics.median(firsts),
            "new_thread_second_ms": 1e3 * statistics.median(seconds), "new_length_first_ms": 1e3 * new_length,
            "new_length_again_ms": 1e3 * again, "repeats": repeats}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    engine = load_engine(args)
    print(json.dumps({"backend": engine.backend, **thread_rows(engine, args.repeats)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
