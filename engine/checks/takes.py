"""Checked takes for Engine.stream: each line is rendered and judged by the policy's rules."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from engine.checks.budget import CheckBudget
from engine.checks.checker import Checker
from engine.checks.policy import CheckPolicy, choose
from engine.checks.verdict import Verdict
from engine.config import offset_seed
from engine.request import SpeechRequest


@dataclass
class Checks:
    """What Engine.stream needs to check its lines: the rules and the loaded checkers."""

    policy: CheckPolicy
    checker: Checker


def checked_take(engine, request: SpeechRequest, *, cancel: threading.Event | None, checks: Checks,
                 reference: torch.Tensor | None, budget: CheckBudget | None = None):
    """(SynthesisResult, Verdict) of the take the policy keeps for one line. request.config.seed is the
    line's seed; takes use it, then the next seeds. `budget`: how long checks and retakes may delay the line."""

    def render(offset: int, n: int):
        return engine.render(request.with_seed(offset_seed(request.config.seed, offset)), n=n, cancel=cancel)

    def check(results) -> list[Verdict]:
        return [checks.checker.check(r.audio, r.sample_rate, request.text, checks.policy.thresholds,
                                      reference=reference, language=request.language) for r in results]

    return choose(render, check, checks.policy, budget)
