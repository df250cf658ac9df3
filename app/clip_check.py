"""Hints about a reference clip, shown as soon as it is recorded, uploaded or trimmed (the measures
and their advice come from the engine's clip diagnostics)."""
from __future__ import annotations

from engine.audio.io import load_clip
from engine.audio.process import inspect_clip
from engine.errors import AudioInputError


def check_file(path: str | None) -> str:
    """Markdown about the clip at `path` ("" when there is none)."""
    if not path:
        return ""
    try:
        report = inspect_clip(load_clip(path))
    except AudioInputError as err:
        return f"⚠ {err}"
    head = f"**{report.seconds:.1f} s** · peak {report.peak:.2f} · signal/noise ≈ {report.snr_db:.0f} dB"
    if not report.hints:
        return head + " · ✓ good reference"
    return head + "\n\n" + "\n".join(f"⚠ {hint}" for hint in report.hints)
