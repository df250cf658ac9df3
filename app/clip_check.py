"""Quick checks of a reference clip, shown as hints as soon as it is recorded or uploaded."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import soundfile as sf

RECOMMENDED_S = (3.0, 10.0)
CLIP_LEVEL = 0.999  # a sample this close to full scale was probably clipped
SILENCE_DBFS = -50.0
WINDOW_S = 0.02


@dataclass(frozen=True)
class ClipReport:
    seconds: float
    peak: float
    clipped_fraction: float
    silent_fraction: float
    level_dbfs: float

    def hints(self) -> list[str]:
        low, high = RECOMMENDED_S
        found = []
        if self.level_dbfs < SILENCE_DBFS + 5:
            found.append("The clip is almost silent: is the microphone muted or too far away?")
        if self.seconds < low:
            found.append(f"Short clip ({self.seconds:.1f} s): {low:.0f}–{high:.0f} s of clear speech clones better.")
        elif self.seconds > high:
            found.append(f"Long clip ({self.seconds:.1f} s): {low:.0f}–{high:.0f} s is recommended. Trim it on the "
                         "waveform (✂), or leave it: without a transcript, long clips are cut at a pause.")
        if self.clipped_fraction > 0.001:
            found.append("The recording is clipped (distorted): record a little quieter.")
        if self.silent_fraction > 0.5 and self.seconds > 1:
            found.append(f"{self.silent_fraction:.0%} of the clip is silence: trim the pauses.")
        return found

    def summary(self) -> str:
        hints = self.hints()
        head = f"**{self.seconds:.1f} s** · peak {self.peak:.2f} · level {self.level_dbfs:.0f} dBFS"
        if not hints:
            return head + " · ✅ looks good"
        return head + "\n\n" + "\n".join(f"⚠️ {h}" for h in hints)


def analyze(samples: np.ndarray, rate: int) -> ClipReport:
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples  # [n]
    mono = mono.astype(np.float32)
    if mono.size == 0:
        return ClipReport(0.0, 0.0, 0.0, 1.0, -120.0)
    window = max(1, int(rate * WINDOW_S))
    frames = mono[: len(mono) // window * window].reshape(-1, window)  # [frames, window]
    frame_db = 20 * np.log10(np.sqrt((frames**2).mean(axis=1)) + 1e-9) if len(frames) else np.zeros(0)
    rms = float(np.sqrt((mono**2).mean()))
    return ClipReport(seconds=len(mono) / rate, peak=float(np.abs(mono).max()),
                      clipped_fraction=float((np.abs(mono) >= CLIP_LEVEL).mean()),
                      silent_fraction=float((frame_db < SILENCE_DBFS).mean()) if len(frame_db) else 1.0,
                      level_dbfs=20 * np.log10(rms + 1e-9))


def check_file(path: str | None) -> str:
    """Markdown hints for the clip at `path` ("" when there is none)."""
    if not path:
        return ""
    try:
        samples, rate = sf.read(path, dtype="float32", always_2d=False)
    except (sf.LibsndfileError, RuntimeError, OSError):
        return "⚠️ This file cannot be read as audio. Try WAV, FLAC, MP3 or OGG."
    return analyze(samples, rate).summary()
