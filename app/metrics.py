"""Live numbers of one generation: time to first audio, real-time factor, audio produced.

Times are measured on the GPU worker from the moment the request starts running (waiting in line
is not counted), so RTF = elapsed / audio seconds is the engine's speed as the user hears it.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass


@dataclass
class LiveMetrics:
    mode: str
    backend: str
    demo: bool
    first_audio_s: float | None = None
    elapsed_s: float = 0.0
    audio_s: float = 0.0
    chunks: int = 0
    seed: int | None = None
    history_id: str | None = None  # once stored: its downloads are /download/history/<id>.wav|.flac

    def add_chunk(self, elapsed_s: float, seconds: float) -> None:
        if self.first_audio_s is None:
            self.first_audio_s = elapsed_s
        self.elapsed_s = elapsed_s
        self.audio_s += seconds
        self.chunks += 1

    @property
    def rtf(self) -> float:
        return self.elapsed_s / self.audio_s if self.audio_s > 0 else math.nan

    def to_json(self) -> dict:
        return {"first_audio_s": self.first_audio_s, "elapsed_s": self.elapsed_s, "audio_s": self.audio_s,
                "rtf": None if math.isnan(self.rtf) else self.rtf, "chunks": self.chunks, "mode": self.mode,
                "backend": self.backend, "seed": self.seed, "demo": self.demo,
                "history_id": self.history_id}

    def to_html(self) -> str:
        ttfa = "—" if self.first_audio_s is None else f"{self.first_audio_s * 1000:.0f} ms"
        rtf = "—" if math.isnan(self.rtf) else f"{self.rtf:.3f}"
        tiles = [("Time to first audio", ttfa, ""), ("Real-time factor", rtf, ""),
                 ("Audio", f"{self.audio_s:.1f} s", ""), ("Mode", self.mode, " vd-metric-text")]
        body = "".join(f'<div class="vd-metric"><span class="vd-metric-label">{html.escape(label)}</span>'
                       f'<span class="vd-metric-value{extra}">{html.escape(value)}</span></div>'
                       for label, value, extra in tiles)
        note = " · demo model: output is noise" if self.demo else ""
        return (f'<div class="vd-metrics">{body}</div>'
                f'<div class="vd-backend">{html.escape(self.backend)}{note}</div>')


def empty_html(backend: str = "") -> str:
    return LiveMetrics(mode="—", backend=backend, demo=False).to_html()
