"""How a line gets its take: checked once, retaken on failure (up to K more takes, rendered together
once the first has failed), or the best of N takes rendered together in one batched forward."""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from engine.checks.verdict import Thresholds, Verdict

T = TypeVar("T")


class CheckMode(str, enum.Enum):
    OFF = "off"
    CHECK = "check"  # check every take, keep it whatever it scores
    RETAKE = "retake"  # on a failed check, the next `retries` seeds together; keep the first that passes
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
    kept = (take := render(0, 1)[0], check([take])[0])
    attempt = 1
    if policy.mode == CheckMode.RETAKE and policy.retries > 0 and not kept[1].passed:
        # the retakes in one batch (one forward per step for all); checked in order, so the kept take
        # and its count of attempts are those of retaking one at a time
        for attempt, take in enumerate(render(1, policy.retries), start=2):
            verdict = check([take])[0]
            if verdict.rank_key() < kept[1].rank_key():
                kept = (take, verdict)
            if verdict.passed:
                break
    kept[1].attempts = attempt
    return kept
