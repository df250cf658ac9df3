"""First audio of Engine.stream for texts whose first pieces have lengths the process has never decoded (a real
user's texts), against the same texts again (what benches that repeat their texts see).

    python -m tools.bench_first_audio_new [--demo | --model PATH] [--mode hifi] [--texts 8]

The engine is loaded, warmed up with one stream and measured on one thread, as the app's GPU worker loads, warms
and runs a lone client's jobs on its first thread. Text i opens with a clause of 3 + i words, so each first piece
has a length of its own (each first chunk's seconds are printed: distinct seconds, distinct lengths). Imports
nothing of tools/, so that one copy of this file times two trees (before and after a change) in one call. Prints
one JSON line."""
from __future__ import annotations

import argparse
import json
import statistics
import threading

WARMUP = "Warming up."
MAX_TEXTS = 8  # first clauses of 3..10 short words: 1-3 s, a stream's first piece (engine/text/chunk.py)


def text(i: int) -> str:
    return f"{' '.join(['Red'] + ['red'] * (2 + i))}, and then the day went on as days in that town always did."


def first_audio_ms(engine, text: str) -> tuple[float, float]:
    """(ms from the call to the first chunk, that chunk's seconds of audio) of one stream, drained to its end."""
    from engine.config import GenerationConfig

    chunks = list(engine.stream(text, config=GenerationConfig(seed=0)))
    return 1e3 * chunks[0].timings.first_audio_s, len(chunks[0].audio) / chunks[0].sample_rate


def measure(model, mode: str, count: int) -> dict:
    from engine.engine import Engine

    engine = Engine.load(model, mode=mode)
    first_audio_ms(engine, WARMUP)
    texts = [text(i) for i in range(count)]
    new = [first_audio_ms(engine, t) for t in texts]
    again = [first_audio_ms(engine, t) for t in texts]
    return {"backend": engine.backend, "mode": mode, "texts": count,
            "new_ms_median": statistics.median(ms for ms, _ in new),
            "again_ms_median": statistics.median(ms for ms, _ in again),
            "new_ms": [ms for ms, _ in new], "again_ms": [ms for ms, _ in again],
            "first_chunk_s": [s for _, s in new]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="checkpoint folder (default: the app's default)")
    parser.add_argument("--demo", action="store_true", help="the tiny random checkpoint")
    parser.add_argument("--mode", default="hifi", choices=("eager", "hifi", "realtime"))
    parser.add_argument("--texts", type=int, default=MAX_TEXTS,
                        help=f"texts of new first-piece lengths (1..{MAX_TEXTS})")
    args = parser.parse_args(argv)
    if not 1 <= args.texts <= MAX_TEXTS:
        parser.error(f"--texts must be 1..{MAX_TEXTS}")
    from engine.constants import DEMO_MODEL

    box: list = []
    thread = threading.Thread(target=lambda: box.append(measure(DEMO_MODEL if args.demo else args.model, args.mode,
                                                                args.texts)))
    thread.start()
    thread.join()
    if not box:
        return 1
    print(json.dumps(box[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
