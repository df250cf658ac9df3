"""Live numbers of one generation: time to first audio, real-time factor, audio produced.

Two first-audio figures, labelled apart: the engine's, measured on the GPU worker from the moment the
request starts running to its first chunk (RTF = elapsed / audio seconds is the engine's speed), and the
one the user lives through, measured in the browser from the click on Generate to the first sound played
(it adds waiting in line, preparing the voice, delivery and the player's buffering).
"""
from __future__ import annotations

import html
import math
import threading
from dataclasses import dataclass, field


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
    heard_first_audio_s: float | None = None  # reported by the page: click on Generate -> first sound played
    live_id: str | None = None  # the page's name for this generation's sound (app/live.py): its report names it
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)  # page vs. worker

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
                "history_id": self.history_id, "heard_first_audio_s": self.heard_first_audio_s}

    def to_html(self) -> str:
        rtf = "—" if math.isnan(self.rtf) else f"{self.rtf:.3f}"
        tiles = [("First sound, heard", milliseconds(self.heard_first_audio_s),
                  "From your click on Generate to the first sound played in this page"),
                 ("First audio, engine", milliseconds(self.first_audio_s),
                  "From the start of the generation on the GPU worker to its first chunk"),
                 ("Real-time factor", rtf, "Generation time / audio length (below 1: faster than real time)"),
                 ("Audio", f"{self.audio_s:.1f} s", "Audio made so far")]
        body = "".join(f'<div class="vd-metric" title="{html.escape(why)}"><span class="vd-metric-label">'
                       f'{html.escape(label)}</span><span class="vd-metric-value">{html.escape(value)}</span></div>'
                       for label, value, why in tiles)
        said = [part for part in (self.mode, self.backend, "demo model: output is noise" if self.demo else "") if part]
        return (f'<div class="vd-metrics">{body}</div>'
                f'<div class="vd-backend">{html.escape(" · ".join(said))}</div>')  # nothing before a generation


def milliseconds(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.0f} ms"


def empty_html(backend: str = "") -> str:
    return LiveMetrics(mode="", backend=backend, demo=False).to_html()
