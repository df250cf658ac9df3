"""How a line gets its take: checked once, retaken on failure (up to K more takes, rendered together
once the first has failed), or the best of N takes rendered together in one batched forward."""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from engine.checks.budget import CheckBudget
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
           policy: CheckPolicy, budget: CheckBudget | None = None) -> tuple[T, Verdict]:
    """The kept take and its verdict. `render(offset, n)` makes n takes seeded offset, offset + 1, ...
    (relative to the line's seed); `check(takes)` gives their verdicts. With a `budget`, checks and retakes that
    would end after it are left out (the first take's check always runs) and the verdict says what was."""
    budget = budget or CheckBudget()
    if policy.mode == CheckMode.BEST_OF_N:
        takes = budget.timed("render", render, 0, policy.candidates)
        budget.start()
        verdicts: list[Verdict] = []
        for take in takes:  # checked in order while a check fits: the best of those checked is kept
            if verdicts and not budget.fits("check"):
                break
            verdicts += budget.timed("check", check, [take])
        best = min(range(len(verdicts)), key=lambda i: verdicts[i].rank_key())
        verdicts[best].attempts = len(takes)
        if len(verdicts) < len(takes):
            unchecked = len(takes) - len(verdicts)
            verdicts[best].over_budget = f"{unchecked} of {len(takes)} takes not checked within {budget}"
        return takes[best], verdicts[best]
    take = budget.timed("render", render, 0, 1)[0]
    budget.start()
    kept = (take, budget.timed("check", check, [take])[0])
    attempt = 1
    if policy.mode == CheckMode.RETAKE and policy.retries > 0 and not kept[1].passed:
        if not budget.fits("render", "check"):
            kept[1].over_budget = f"no retake: it would not end within {budget}"
            return kept
        # the retakes in one batch (one forward per step for all); checked in order, so the kept take
        # and its count of attempts are those of retaking one at a time
        for attempt, take in enumerate(budget.timed("render", render, 1, policy.retries), start=2):
            if attempt > 2 and not budget.fits("check"):
                attempt -= 1
                kept[1].over_budget = f"{policy.retries + 1 - attempt} of {policy.retries} retakes not checked " \
                                      f"within {budget}"
                break
            verdict = budget.timed("check", check, [take])[0]
            if verdict.rank_key() < kept[1].rank_key():
                kept = (take, verdict)
            if verdict.passed:
                break
    kept[1].attempts = attempt
    return kept
