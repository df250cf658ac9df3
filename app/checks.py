"""The take checks in the app: which checks this computer can run, the loaded checkers (made once, on
the GPU worker, by the first checked generation; again after a download), and downloads of the
missing models, which happen only when the user asks (the size is said first); the badges that
show a generation's checks in the output panel and the History tab."""
from __future__ import annotations

import html
import threading
from collections.abc import Callable

from engine.audio import asr
from engine.checks import checker as checker_module
from engine.checks.checker import Checker
from engine.checks.policy import CheckMode, CheckPolicy
from engine.checks.verdict import Thresholds
from engine.hub import HubModel

from .settings import Settings

MODES = [("Off", CheckMode.OFF.value), ("Check only", CheckMode.CHECK.value),
         ("Retake on failure", CheckMode.RETAKE.value), ("Best of N", CheckMode.BEST_OF_N.value)]


def policy_from(settings: Settings) -> CheckPolicy:
    return CheckPolicy(settings.check_mode, settings.check_candidates, settings.check_retries,
                        Thresholds(max_wer=settings.check_max_wer, min_similarity=settings.check_min_similarity))


def models() -> dict[str, HubModel]:
    """The model each model-backed check needs (looked up at call time: tests point them elsewhere)."""
    return {"words": asr.WHISPER, "voice": checker_module.SPEAKER_MODEL}


class CheckService:
    def __init__(self, device: Callable[[], object]):
        self._device = device
        self._checker: Checker | None = None
        self._lock = threading.Lock()

    def missing(self) -> dict[str, HubModel]:
        """Model-backed checks whose model is not on this computer (no network)."""
        return {name: m for name, m in models().items() if m.local_folder() is None}

    def checker(self) -> Checker:
        """The checkers, loaded on first use. Call it on the GPU worker (it may load models there)."""
        with self._lock:
            if self._checker is None:
                self._checker = Checker.load(self._device())
            return self._checker

    def plan_download(self) -> tuple[dict[str, HubModel], int]:
        """The missing models and their total size in bytes (asks the hub; raises offline)."""
        missing = self.missing()
        return missing, sum(m.download_plan()[1] for m in missing.values())

    def download(self, progress: Callable[[float, str], None]) -> None:
        """Fetch every missing model, then load the checkers afresh on next use."""
        for model in self.missing().values():
            model.download(progress)
        with self._lock:
            self._checker = None


def badge_html(parts: list[dict], skipped: dict | None = None) -> str:
    """One line per checked part: 'Part 2: words ok · voice 0.82 · signal ok', a failing part in red
    with what failed; then which checks could not run and why."""
    if not parts:
        return ""
    rows = []
    for i, part in enumerate(parts, 1):
        state = "ok" if part["passed"] else "failed"
        problems = f' — {html.escape(part["problems"])}' if part.get("problems") else ""
        rows.append(f'<div class="vd-check vd-check-{state}" data-passed="{str(part["passed"]).lower()}">'
                    f'{"✓" if part["passed"] else "✗"} Part {i}: {html.escape(part["badge"])}{problems}</div>')
    for name, why in (skipped or {}).items():
        rows.append(f'<div class="vd-check vd-check-skipped">{html.escape(name.capitalize())} not checked: '
                    f'{html.escape(why)}</div>')
    return f'<div class="vd-checks-badge">{"".join(rows)}</div>'


def summary(checks: dict | None) -> str:
    """The History and Studio column: '—' when unchecked, 'ok' or what failed ('1/3 failed: words'); when some
    checks could not run, what was checked ('signal ok; words, voice not checked')."""
    parts = (checks or {}).get("parts") or []
    if not parts:
        return "—"
    skipped = sorted({*(checks.get("skipped") or {}), *(name for p in parts for name in p.get("skipped") or {})})
    unchecked = f"; {', '.join(skipped)} not checked" if skipped else ""
    failed = [p for p in parts if not p["passed"]]
    if not failed:
        ran = {_kind(name) for p in parts for name in p["checks"]}
        return f"{', '.join(k for k in _KINDS if k in ran)} ok{unchecked}" if skipped else "ok"
    names = sorted({name for p in failed for name, c in p["checks"].items() if not c["passed"]})
    return f"{len(failed)}/{len(parts)} failed: {', '.join(names)}{unchecked}"


_KINDS = ("words", "voice", "signal")  # as the badge groups them: clipping, pauses and dropouts are the signal


def _kind(check: str) -> str:
    return check if check in ("words", "voice") else "signal"
