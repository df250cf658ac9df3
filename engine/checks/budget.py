"""A latency budget for checked takes (the clauses of a streamed answer, app/answer.py): a line's checks and its
retakes may delay its audio by at most `seconds` after its first take(s) are made. Work is begun only when it is
expected to end in time, expected from how long the same work took the last time (a check: the check before it; a
retake batch: the line's first take). The first check of a line always runs, so that every checked line gets a
verdict."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_BUDGET_MS = 250  # streamed answers' clauses, unless their client sets another (app/answer.py)
MAX_BUDGET_MS = 10_000


class CheckBudget:
    def __init__(self, seconds: float = math.inf, clock: Callable[[], float] = time.perf_counter):
        if not seconds > 0:
            raise ValueError("a check budget is a positive time")
        self.seconds, self.clock = seconds, clock
        self._took: dict[str, float] = {}  # what each kind of work took the last time
        self._deadline = math.inf

    def start(self) -> None:
        """A line's first take(s) are made: its checks' time runs from now."""
        self._deadline = self.clock() + self.seconds

    def fits(self, *works: str) -> bool:
        """Whether `works` done one after another are expected to end by the deadline."""
        return self.clock() + sum(self._took.get(work, 0.0) for work in works) <= self._deadline

    def timed(self, work: str, fn: Callable[..., T], *args) -> T:
        """fn(*args), its time kept as what `work` takes."""
        began = self.clock()
        try:
            return fn(*args)
        finally:
            self._took[work] = self.clock() - began

    def __str__(self) -> str:
        return f"the {1e3 * self.seconds:.0f} ms budget"
