"""Clips libsndfile cannot open (a phone's .m4a, a browser's .webm, video files...), decoded by the ffmpeg
command line when it is installed: whatever ffmpeg decodes is a clip."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

TIMEOUT_S = 120


def ffmpeg_available() -> bool:
    return shutil.which("ffmpeg") is not None


def decode_with_ffmpeg(path: Path, max_seconds: float | None) -> tuple[np.ndarray, int] | None:
    """(channels, n) float32 at the file's own rate, of its first audio stream; at most one second past
    `max_seconds` (so a cut can still be noticed). None when ffmpeg is missing or cannot decode the file."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        return None
    limit = [] if max_seconds is None else ["-t", f"{max_seconds + 1:.3f}"]
    with tempfile.TemporaryDirectory(prefix="voicedesk-decode-") as folder:
        wav = Path(folder) / "clip.wav"
        try:
            done = subprocess.run([ffmpeg, "-v", "error", "-nostdin", "-i", str(path), "-map", "0:a:0", *limit,
                                   "-c:a", "pcm_f32le", str(wav)], capture_output=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0 or not wav.is_file():
            return None
        try:
            data, rate = sf.read(wav, dtype="float32", always_2d=True)  # (n, C)
        except (sf.LibsndfileError, RuntimeError):
            return None
    return data.T, int(rate)
