"""Time to a stream's first piece of text with "Speak numbers and dates" on (CPU only, no model): the whole text
normalised before the first piece (as before) against normalised as the pieces read it (normalize.normalized_parts,
as Engine.stream does now), for texts of several lengths; and the time until all of the text is ready, both ways.

    python -m tools.bench_tn [--chars 1000,8000,50000] [--runs 3]

Needs the tn extra (WeTextProcessing). After a warm-up (the grammars load once), each size is timed `runs` times,
the two ways interleaved; the median is printed. Both ways are checked to give the same pieces.
"""
from __future__ import annotations

import argparse
import statistics
import time

from engine.text.chunk import stream_chunks, stream_pieces
from engine.text.clean import clean_text
from engine.text.normalize import normalize_text, normalized_parts
from tools.workloads import prose

# sentences with numbers, dates, money, times and units, between plain prose
_NUMBERS = (
    "The train left at 7:45 a.m. and reached the coast 3 hours later.",
    "She paid $1,250.75 for the 2 chairs on Dec. 4, 2026.",
    "The river rose 2.5 m in 36 hours, the highest since 1998.",
    "Flight 370 carried 239 people, and 12% of them were children.",
    "Call 555-0134 before 5 pm. Room No. 12 is on the 3rd floor.",
)


def bench_text(chars: int) -> str:
    """About `chars` characters of English prose with a sentence of numbers after every two of prose."""
    plain = prose(chars / 700).replace("\n\n", " ").split(". ")
    sentences, i = [], 0
    while sum(map(len, sentences)) + len(sentences) < chars:
        sentences.append(_NUMBERS[i // 3 % len(_NUMBERS)] if i % 3 == 2 else plain[i % len(plain)].rstrip(".") + ".")
        i += 1
    return " ".join(sentences)


def whole_first(text: str) -> tuple[float, float, list[str]]:
    """Before: the whole text normalised, then split; (first piece ready, all ready, pieces), seconds."""
    t0 = time.perf_counter()
    pieces = stream_chunks(normalize_text(clean_text(text), "en"))
    elapsed = time.perf_counter() - t0
    return elapsed, elapsed, pieces


def lazy_first(text: str) -> tuple[float, float, list[str]]:
    """Now: normalised as the pieces read it; (first piece ready, all ready, pieces), seconds."""
    t0 = time.perf_counter()
    pieces = stream_pieces(normalized_parts(clean_text(text), "en"))
    first = [next(pieces)[0]]
    first_s = time.perf_counter() - t0
    rest = [piece for piece, _ in pieces]
    return first_s, time.perf_counter() - t0, first + rest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", default="1000,8000,50000", help="text lengths, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    normalize_text("Warm up on 3/14/2025 at 10:30 a.m. for $5.", "en")
    print("| characters | first piece, whole text first (s) | first piece, as read (s) | all text, whole (s) "
          "| all text, as read (s) |")
    print("|---|---|---|---|---|")
    for chars in map(int, args.chars.split(",")):
        text = bench_text(chars)
        before, after = [], []
        for _ in range(args.runs):
            before.append(whole_first(text))
            after.append(lazy_first(text))
            assert before[-1][2] == after[-1][2], "the pieces differ"
        med = [statistics.median(run[k] for run in runs) for runs in (before, after) for k in (0, 1)]
        print(f"| {len(text):,} | {med[0]:.3f} | {med[2]:.3f} | {med[1]:.2f} | {med[3]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
