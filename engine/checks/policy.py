"""How a line gets its take: checked once, retaken on failure (up to K more takes, one at a time),
or the best of N takes rendered together in one batched forward."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from engine.checks.verdict import Thresholds, Verdict

T = TypeVar("T")


class CheckMode(str, enum.Enum):
    OFF = "off"
    CHECK = "check"  # check every take, keep it whatever it scores
    RETAKE = "retake"  # render again (next seed) while a check fails, up to `retries` times
    BEST_OF_N = "best_of_n"  # render `candidates` takes in one batch, keep the best


@dataclass(frozen=True)
class CheckPolicy:
    mode: CheckMode = CheckMode.OFF
    candidates: int = 3
    retries: int = 2
    thresholds: Thresholds = field(default_factory=Thresholds)

    def __post_init__(self):
        object.__setattr__(self, "mode", CheckMode(self.mode))
        if self.candidates < 1 or self.retries < 0:
            raise ValueError("candidates must be at least 1 and retries at least 0")


def choose(render: Callable[[int, int], list[T]], check: Callable[[list[T]], list[Verdict]],
           policy: CheckPolicy) -> tuple[T, Verdict]:
    """The kept take and its verdict. `render(offset, n)` makes n takes seeded offset, offset + 1, ...
    (relative to the line's seed); `check(takes)` gives their verdicts."""
    if policy.mode == CheckMode.BEST_OF_N:
        takes = render(0, policy.candidates)
        verdicts = check(takes)
        best = min(range(len(takes)), key=lambda i: verdicts[i].rank_key())
        verdicts[best].attempts = len(takes)
        return takes[best], verdicts[best]
    tries = 1 + policy.retries if policy.mode == CheckMode.RETAKE else 1
    kept = None
    for attempt in range(tries):
        take = render(attempt, 1)[0]
        verdict = check([take])[0]
        if kept is None or verdict.rank_key() < kept[1].rank_key():
            kept = (take, verdict)
        if verdict.passed:
            break
    kept[1].attempts = attempt + 1
    return kept
