"""Loudness to a stated EBU R128 target with ffmpeg's two-pass `loudnorm` filter (linear gain when the
true-peak ceiling allows it), run by the ffmpeg command line: audio in, audio out, nothing encoded here
(app/encoder.py writes the files).

Samples go to ffmpeg and back through pipes as 32-bit floats, so nothing is rounded before encoding.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np

from .encoder import EncodeError

LRA = 11.0  # loudness range target; linear normalisation keeps the speech's own range below it


@dataclass(frozen=True)
class Loudness:
    integrated_lufs: float
    true_peak_db: float
    lra: float
    threshold: float


def ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        raise EncodeError("Setting the loudness needs ffmpeg: install it (Debian/Ubuntu: apt install ffmpeg; "
                          "macOS: brew install ffmpeg; Windows: winget install ffmpeg).")
    return path


def _run(args: list[str], audio: np.ndarray, rate: int) -> subprocess.CompletedProcess:
    """Run ffmpeg on `audio` (mono float32) piped in; its stderr is the log."""
    command = [ffmpeg(), "-hide_banner", "-nostdin", "-y", "-f", "f32le", "-ar", str(rate), "-ac", "1",
               "-i", "pipe:0", *args]
    pcm = np.ascontiguousarray(audio, dtype="<f4").tobytes()
    done = subprocess.run(command, input=pcm, capture_output=True)
    log = done.stderr.decode("utf-8", errors="replace").strip()
    if done.returncode != 0:
        raise EncodeError(f"ffmpeg failed: {log.splitlines()[-1] if log else done.returncode}")
    return done


def measure_loudness(audio: np.ndarray, rate: int) -> Loudness:
    """EBU R128 integrated loudness, true peak and loudness range (loudnorm's measuring pass)."""
    log = _run(["-af", "loudnorm=print_format=json", "-f", "null", "-"], audio, rate).stderr.decode("utf-8", "replace")
    found = re.search(r"\{[^{}]*\"input_i\"[^{}]*\}", log)
    if found is None:
        raise EncodeError("ffmpeg did not report the loudness.")
    values = json.loads(found.group())
    return Loudness(float(values["input_i"]), float(values["input_tp"]), float(values["input_lra"]),
                    float(values["input_thresh"]))


def normalize_loudness(audio: np.ndarray, rate: int, target_lufs: float, true_peak_db: float) -> np.ndarray:
    """`audio` (mono float32) at `target_lufs` integrated loudness, true peaks under `true_peak_db`."""
    audio = np.asarray(audio, dtype=np.float32)
    measured = measure_loudness(audio, rate)
    if not np.isfinite(measured.integrated_lufs):  # silence: nothing to normalise
        return audio
    loudnorm = (f"loudnorm=I={target_lufs}:TP={true_peak_db}:LRA={LRA}:measured_I={measured.integrated_lufs}:"
                f"measured_TP={measured.true_peak_db}:measured_LRA={measured.lra}:"
                f"measured_thresh={measured.threshold}:linear=true,aresample={rate}")
    out = _run(["-af", loudnorm, "-ar", str(rate), "-ac", "1", "-f", "f32le", "pipe:1"], audio, rate).stdout
    return np.frombuffer(out, dtype="<f4").astype(np.float32)
