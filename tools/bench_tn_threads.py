"""What "Speak numbers and dates" leaves the app's other threads and streams (CPU only, no model).

    python -m tools.bench_tn_threads [--chars 8000,50000]
    python -m tools.bench_tn_threads --streams 8 [--rounds 5] [--stagger S] [--children N] [--head-start N]
    python -m tools.bench_tn_threads --memory

The first: the longest gap a thread ticking every 1 ms sees while `normalize.normalized_parts` reads a whole text,
with WeTextProcessing run in the app's process (as before: pynini keeps the GIL for a whole run) against in its
child process (normalize_process, now); and the time to the first part, the child cold (spawned, its grammar
loading) and warm. The two ways' parts are checked equal.

`--streams`: that many threads call `normalized_parts` at once (or `--stagger` seconds apart), each on a text of
its own (400 to 680 characters, an assistant's answer), and read all its parts at once (the later runs queue as
soon as they can); per stream the time from its start to its first part and to its last; p50 / p90 / max over
streams and rounds, after an untimed round (the grammars loading). `--children N` runs the children's pool at that
size (normalize_process.CHILDREN otherwise), `--head-start N` with that FIRST_RUN_HEAD_START (0: in arrival order).
Then the children's resident memory.

`--memory`: a child's resident and peak memory (Linux) with the English grammar loaded, after longer texts, then
with Chinese loaded too.

Needs the tn extra.
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
from unittest import mock

from engine.text import normalize, normalize_process
from engine.text.normalize import normalize_text, normalized_parts, outside_markup, wetext_grammar
from tools.bench_tn import bench_text

STREAM_CHARS = range(400, 700, 40)  # a text's length, per stream (cycled past eight streams)


def in_process(text: str, *, language: str, pinyin: bool, first: bool = False,
               cancel: threading.Event | None = None) -> str:
    """The grammar run in this process, as before normalize_process."""
    return outside_markup(text, wetext_grammar(language), pinyin)


def longest_gap(text: str) -> tuple[float, float, list[str]]:
    """(longest gap between a 1 ms ticker's turns, first part's time, parts), seconds, over all of the text."""
    stopped, gaps = threading.Event(), [0.0]

    def tick() -> None:
        last = time.perf_counter()
        while not stopped.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps[0], last = max(gaps[0], now - last), now

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    t0 = time.perf_counter()
    parts = normalized_parts(text, "en")
    first = [next(parts)]
    first_s = time.perf_counter() - t0
    parts = first + list(parts)
    stopped.set()
    ticker.join()
    return gaps[0], first_s, parts


def first_part_s(text: str) -> float:
    t0 = time.perf_counter()
    next(normalized_parts(text, "en"))
    return time.perf_counter() - t0


def streams_at_once(texts: list[str], stagger_s: float) -> list[tuple[float, float]]:
    """Each text's (first part, last part) seconds from its start, all read by threads of their own that start
    together, or the i-th `i * stagger_s` later."""
    start, times = threading.Barrier(len(texts)), [(0.0, 0.0)] * len(texts)

    def read(index: int) -> None:
        start.wait()
        time.sleep(index * stagger_s)
        t0 = time.perf_counter()
        parts = normalized_parts(texts[index], "en")
        next(parts)
        first_s = time.perf_counter() - t0
        for _ in parts:
            pass
        times[index] = (first_s, time.perf_counter() - t0)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def resident_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) memory of process `pid`, MB (Linux: /proc)."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return tuple(int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))


def children_pids() -> list[int]:
    pool = getattr(normalize_process, "_pool", None)
    if pool is None:  # an engine before the pool (8e42d90, the recorded comparison's old side): one child
        return [normalize_process._child.process.pid] if normalize_process._child else []
    return [child.process.pid for child in pool.children if child is not None]


def spread(values: list[float]) -> str:
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return f"{deciles[4]:.3f} / {deciles[8]:.3f} / {max(values):.3f}"


def bench_streams(streams: int, rounds: int, stagger_s: float) -> None:
    texts = [bench_text(STREAM_CHARS[i % len(STREAM_CHARS)]) for i in range(streams)]
    print(f"{streams} streams, {stagger_s} s apart, texts of {min(map(len, texts))}-{max(map(len, texts))} "
          f"characters; an untimed round, then {rounds}")
    streams_at_once(texts, stagger_s)
    samples = [times for _ in range(rounds) for times in streams_at_once(texts, stagger_s)]
    print("| first part p50 / p90 / max (s) | last part p50 / p90 / max (s) |")
    print("|---|---|")
    print(f"| {spread([first for first, _ in samples])} | {spread([last for _, last in samples])} |")
    memory = [resident_mb(pid) for pid in children_pids()]
    print("children's resident / peak memory (MB): " + ", ".join(f"{now:.0f} / {peak:.0f}" for now, peak in memory))


def bench_memory() -> None:
    short = "I have 2 cats."
    normalize_text(short, "en")
    (pid,) = children_pids()
    print("a child, English loaded and used: resident / peak %.0f / %.0f MB" % resident_mb(pid))
    for chars in (700, 2000, 8000):
        normalize_text(bench_text(chars), "en")
        normalize_text(short, "en")  # answered once the child is done with the run before
        print(f"after {chars:,} characters of English, then a short text: %.0f / %.0f MB" % resident_mb(pid))
    normalize_text("我有2只猫。", "zh")
    print("Chinese loaded and used too: %.0f / %.0f MB" % resident_mb(pid))


def bench_gaps(chars: str) -> None:
    sample = bench_text(1000)
    with mock.patch.object(normalize, "normalized_in_child", in_process):
        print(f"first part, in-process, grammar loading: {first_part_s(sample):.3f} s; "
              f"loaded: {first_part_s(sample):.3f} s")
    normalize_process.stop()
    print(f"first part, child cold (spawn + grammar loading): {first_part_s(sample):.3f} s; "
          f"warm: {first_part_s(sample):.3f} s")
    print("| characters | longest 1 ms-ticker gap, in-process (s) | in the child (s) "
          "| first part, in-process (s) | in the child (s) |")
    print("|---|---|---|---|---|")
    for size in map(int, chars.split(",")):
        text = bench_text(size)
        with mock.patch.object(normalize, "normalized_in_child", in_process):
            gap_before, first_before, parts_before = longest_gap(text)
        gap_after, first_after, parts_after = longest_gap(text)
        assert parts_before == parts_after, "the parts differ"
        print(f"| {len(text):,} | {gap_before:.3f} | {gap_after:.3f} | {first_before:.3f} | {first_after:.3f} |",
              flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", default="8000,50000", help="text lengths, comma-separated (the ticker's gap)")
    parser.add_argument("--streams", type=int, help="time this many streams at once instead")
    parser.add_argument("--rounds", type=int, default=5, help="with --streams")
    parser.add_argument("--children", type=int, help="with --streams: the children's pool at this size")
    parser.add_argument("--stagger", type=float, default=0.0, help="with --streams: seconds between their starts")
    parser.add_argument("--head-start", type=int, help="with --streams: FIRST_RUN_HEAD_START (0: arrival order)")
    parser.add_argument("--memory", action="store_true", help="a child's resident memory instead")
    args = parser.parse_args(argv)
    if args.children is not None:
        normalize_process._pool = normalize_process._Pool(args.children)
    if args.head_start is not None:
        normalize_process.FIRST_RUN_HEAD_START = args.head_start
    try:
        if args.memory:
            bench_memory()
        elif args.streams:
            bench_streams(args.streams, args.rounds, args.stagger)
        else:
            bench_gaps(args.chars)
    finally:
        normalize_process.stop()


if __name__ == "__main__":
    main()
