"""What a handler shows while its GPU job waits in line: the place, said one way everywhere."""
from __future__ import annotations


def in_line(place: int) -> str:
    """The sentence for a job at `place` in line (1: next)."""
    suffix = "th" if 10 <= place % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(place % 10, "th")
    return f"Waiting in line: {place}{suffix} (one generation runs at a time)."

