"""Write a reproducible Studio script of about N minutes of speech (chapters, a narrator, two designed voices,
pauses) for timing `launcher.py render` on long-form work:

    python -m tools.studio_script --minutes 10 book.md
    python launcher.py render book.md --out book.m4b --model CHECKPOINT

The length is the model's own estimate (the one the Studio's time-left figure uses); lines cycle through
the benchmark workloads' English texts of about 3, 10 and 25 s."""
from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from engine.text.duration import text_weight, weight_per_second
from tools.workloads import TEXTS

SPEAKERS = ("", "Ada: ", "", "Ben: ")  # "" is the narrator
HEADER = "[voice Ada = female, low pitch]\n[voice Ben = male, british accent]\n"
LINES_PER_CHAPTER = 24


def script(minutes: float) -> str:
    lines, seconds = [HEADER], 0.0
    texts = itertools.cycle([TEXTS["en"][25], TEXTS["en"][10], TEXTS["en"][3]])
    for index in itertools.count():
        if seconds >= minutes * 60:
            break
        if index % LINES_PER_CHAPTER == 0:
            lines.append(f"\n# Chapter {index // LINES_PER_CHAPTER + 1}\n")
        text = next(texts)
        lines.append(f"{SPEAKERS[index % len(SPEAKERS)]}{text}\n")
        if index % 7 == 6:
            lines.append("[pause 1s]\n")
        seconds += text_weight(text) / weight_per_second()
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.write_text(script(args.minutes), encoding="utf-8")


if __name__ == "__main__":
    main()
