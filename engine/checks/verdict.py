"""What the checks of one take say: each check's score against its threshold, and the take's verdict."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Thresholds:
    """Pass/fail limits, changeable by the user. How the defaults were chosen: docs/checks.md."""

    max_wer: float = 0.2  # words: word error rate of the transcript against the text
    min_similarity: float = 0.75  # voice: cosine similarity of speaker embeddings, take vs reference
    max_clipped: float = 0.001  # signal: fraction of samples at full scale
    max_pause_s: float = 1.5  # signal: longest pause inside the take
    max_dropouts: int = 0  # signal: sudden drops to silence in the middle of sound


@dataclass(frozen=True)
class Check:
    name: str  # words | voice | clipping | pauses | dropouts
    score: float  # what was measured (WER, similarity, fraction, seconds, count)
    threshold: float
    passed: bool
    detail: str = ""  # what failed, in words ("missing 'brown fox'")

    def label(self) -> str:
        """Short badge text: 'words ok', 'voice 0.82', 'pauses 2.1 s'."""
        if self.name == "voice":
            return f"voice {self.score:.2f}"
        if self.passed:
            return f"{self.name} ok"
        if self.name == "words":
            return f"words {self.score:.0%} wrong"
        if self.name == "pauses":
            return f"pause {self.score:.1f} s"
        if self.name == "clipping":
            return f"clipping {self.score:.1%}"
        return f"{self.name} {self.score:g}"


@dataclass
class Verdict:
    """Every check of one take; `skipped` names checks that could not run here and why."""

    checks: list[Check] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    attempts: int = 1  # takes rendered to get this one
    over_budget: str = ""  # what a latency budget (engine/checks/budget.py) left out, in words; "" if nothing

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def get(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def rank_key(self) -> tuple:
        """Smaller is better: fewer failed checks, then fewer wrong words, then a closer voice."""
        words, voice = self.get("words"), self.get("voice")
        return (len(self.failed), words.score if words else 0.0, -voice.score if voice else 0.0)

    def badge(self) -> str:
        """One line for the UI: 'words ok · voice 0.82 · signal ok'."""
        parts = [c.label() for c in self.checks if c.name in ("words", "voice")]
        signal = [c for c in self.checks if c.name not in ("words", "voice")]
        bad = [c.label() for c in signal if not c.passed]
        if signal:
            parts += bad or ["signal ok"]
        if self.attempts > 1:
            parts.append(f"{self.attempts} takes")
        return " · ".join(parts)

    def problems(self) -> str:
        """The failing parts in words, empty when all passed."""
        return "; ".join(f"{c.name}: {c.detail}" if c.detail else c.label() for c in self.failed)

    def to_json(self) -> dict:
        """`over_budget` only when a budget left something out."""
        return {"passed": self.passed, "attempts": self.attempts, "badge": self.badge(), "problems": self.problems(),
                "checks": {c.name: {k: v for k, v in asdict(c).items() if k != "name"} for c in self.checks},
                "skipped": dict(self.skipped), **({"over_budget": self.over_budget} if self.over_budget else {})}
