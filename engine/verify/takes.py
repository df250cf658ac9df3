"""Checked takes for Engine.stream: each line is rendered and judged by the policy's rules."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from engine.verify.policy import VerifyPolicy, choose
from engine.verify.verdict import Verdict
from engine.verify.verifier import Verifier


@dataclass
class Checks:
    """What Engine.stream needs to check its lines: the rules and the loaded checkers."""

    policy: VerifyPolicy
    verifier: Verifier


def checked_take(engine, text: str, voice, instruct: str | None, language: str | None, config,
                 cancel: threading.Event | None, checks: Checks, reference: torch.Tensor | None):
    """(SynthesisResult, Verdict) of the take the policy keeps for one line. config.seed is the
    line's seed; takes use it, then the next seeds."""

    def render(offset: int, n: int):
        cfg = config.replace(seed=config.seed + offset)
        if n == 1:
            return [engine.synthesize(text, voice, instruct, language, cfg, cancel)]
        return engine.takes(text, voice, instruct, language, cfg, n, cancel)

    def check(results) -> list[Verdict]:
        return [checks.verifier.check(r.audio, r.sample_rate, text, checks.policy.thresholds, reference, language)
                for r in results]

    return choose(render, check, checks.policy)
