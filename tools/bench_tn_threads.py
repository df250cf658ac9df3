"""What "Speak numbers and dates" leaves the app's other threads (CPU only, no model): the longest gap a thread
ticking every 1 ms sees while `normalize.normalized_parts` reads a whole text, with WeTextProcessing run in the app's
process (as before: pynini keeps the GIL for a whole run) against in its child process (normalize_process, now);
and the time to the first part, the child cold (spawned, its grammar loading) and warm.

    python -m tools.bench_tn_threads [--chars 8000,50000]

Needs the tn extra. The two ways' parts are checked equal.
"""
from __future__ import annotations

import argparse
import threading
import time
from unittest import mock

from engine.text import normalize, normalize_process
from engine.text.normalize import normalized_parts, outside_markup, wetext_grammar
from tools.bench_tn import bench_text


def in_process(text: str, *, language: str, pinyin: bool, cancel: threading.Event | None = None) -> str:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", default="8000,50000", help="text lengths, comma-separated")
    args = parser.parse_args(argv)
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
    for chars in map(int, args.chars.split(",")):
        text = bench_text(chars)
        with mock.patch.object(normalize, "normalized_in_child", in_process):
            gap_before, first_before, parts_before = longest_gap(text)
        gap_after, first_after, parts_after = longest_gap(text)
        assert parts_before == parts_after, "the parts differ"
        print(f"| {len(text):,} | {gap_before:.3f} | {gap_after:.3f} | {first_before:.3f} | {first_after:.3f} |",
              flush=True)
    normalize_process.stop()


if __name__ == "__main__":
    main()
