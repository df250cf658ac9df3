"""What a handler shows while its GPU job waits in line: the place, said one way everywhere."""
from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

T = TypeVar("T")


def in_line(place: int) -> str:
    """The sentence for a job at `place` in line (1: next)."""
    suffix = "th" if 10 <= place % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(place % 10, "th")
    return f"Waiting in line: {place}{suffix} (one generation runs at a time)."


def relay(places: Generator[int, None, T], update: Callable[[str], tuple]) -> Generator[tuple, None, T]:
    """Yield `update(sentence)` for each place in line `places` reports (GpuWorker.result) and return its
    value: `voice = yield from relay(...)` inside a Gradio handler. Closed early (the page went away), it
    closes `places`, which drops the job."""
    try:
        while True:
            try:
                place = next(places)
            except StopIteration as done:
                return done.value
            yield update(in_line(place))
    finally:
        places.close()
