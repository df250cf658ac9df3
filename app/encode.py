"""Audio files through ffmpeg: WAV, FLAC, MP3 and M4B (AAC with chapter marks), loudness-normalised to an
EBU R128 target with ffmpeg's two-pass `loudnorm` (linear gain when the true-peak ceiling allows it).

Samples go to ffmpeg through a pipe as 32-bit floats, so nothing is rounded before the last step.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import VoiceDeskError
from engine.fileio import atomic_write

FORMATS = {  # suffix -> ffmpeg output arguments
    ".wav": ["-c:a", "pcm_s16le", "-f", "wav"],
    ".flac": ["-c:a", "flac", "-sample_fmt", "s16", "-f", "flac"],
    ".mp3": ["-c:a", "libmp3lame", "-b:a", "128k", "-f", "mp3"],
    ".m4b": ["-c:a", "aac", "-b:a", "96k", "-movflags", "+faststart", "-f", "ipod"],
    ".m4a": ["-c:a", "aac", "-b:a", "128k", "-movflags", "+faststart", "-f", "ipod"],
}
LRA = 11.0  # loudness range target; linear normalisation keeps the speech's own range below it


class EncodeError(VoiceDeskError):
    """ffmpeg is missing or could not write the file."""


@dataclass(frozen=True)
class Loudness:
    integrated_lufs: float
    true_peak_db: float
    lra: float
    threshold: float


@dataclass(frozen=True)
class ChapterMark:
    title: str
    start_s: float
    end_s: float


def ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        raise EncodeError("Exporting audio needs ffmpeg: install it (Debian/Ubuntu: apt install ffmpeg; "
                          "macOS: brew install ffmpeg; Windows: winget install ffmpeg).")
    return path


def _run(args: list[str], audio: np.ndarray, rate: int) -> str:
    """Run ffmpeg on `audio` (mono float32) piped in; returns its log (stderr)."""
    command = [ffmpeg(), "-hide_banner", "-nostdin", "-y", "-f", "f32le", "-ar", str(rate), "-ac", "1",
               "-i", "pipe:0", *args]
    pcm = np.ascontiguousarray(audio, dtype="<f4").tobytes()
    done = subprocess.run(command, input=pcm, capture_output=True)
    log = done.stderr.decode("utf-8", errors="replace")
    if done.returncode != 0:
        raise EncodeError(f"ffmpeg failed: {log.strip().splitlines()[-1] if log.strip() else done.returncode}")
    return log


def measure_loudness(audio: np.ndarray, rate: int) -> Loudness:
    """EBU R128 integrated loudness, true peak and loudness range (loudnorm's measuring pass)."""
    log = _run(["-af", "loudnorm=print_format=json", "-f", "null", "-"], audio, rate)
    found = re.search(r"\{[^{}]*\"input_i\"[^{}]*\}", log)
    if found is None:
        raise EncodeError("ffmpeg did not report the loudness.")
    values = json.loads(found.group())
    return Loudness(float(values["input_i"]), float(values["input_tp"]), float(values["input_lra"]),
                    float(values["input_thresh"]))


def _loudnorm_filter(audio: np.ndarray, rate: int, target_lufs: float, true_peak_db: float) -> str:
    measured = measure_loudness(audio, rate)
    if not np.isfinite(measured.integrated_lufs):  # silence: nothing to normalise
        return "anull"
    return (f"loudnorm=I={target_lufs}:TP={true_peak_db}:LRA={LRA}:measured_I={measured.integrated_lufs}:"
            f"measured_TP={measured.true_peak_db}:measured_LRA={measured.lra}:"
            f"measured_thresh={measured.threshold}:linear=true,aresample={rate}")


def encode(audio: np.ndarray, rate: int, path: str | Path, target_lufs: float | None = -18.0,
           true_peak_db: float = -2.0, chapters: list[ChapterMark] | None = None, title: str | None = None) -> Path:
    """Write `audio` to `path` (format from its suffix), loudness-normalised unless `target_lufs` is None,
    with chapter marks where the container has them (M4B, MP3). Written atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise EncodeError(f"Cannot write {path.name}: use one of {', '.join(FORMATS)}.")
    if len(audio) == 0:
        raise EncodeError("There is no audio to export.")
    audio = np.asarray(audio, dtype=np.float32)
    filters = "anull" if target_lufs is None else _loudnorm_filter(audio, rate, target_lufs, true_peak_db)
    with tempfile.TemporaryDirectory(prefix="voicedesk-encode-") as tmp:
        meta = Path(tmp) / "meta.txt"
        meta.write_text(_ffmetadata(chapters or [], title), encoding="utf-8")
        def write(target: str) -> None:
            _run(["-f", "ffmetadata", "-i", str(meta), "-map", "0:a", "-map_metadata", "1", "-map_chapters", "1",
                  "-af", filters, "-ar", str(rate), *FORMATS[suffix], target], audio, rate)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, write)
    return path


def _ffmetadata(chapters: list[ChapterMark], title: str | None) -> str:
    lines = [";FFMETADATA1"]
    if title:
        lines.append(f"title={_escape(title)}")
    for mark in chapters:
        lines += ["[CHAPTER]", "TIMEBASE=1/1000", f"START={round(mark.start_s * 1000)}",
                  f"END={round(mark.end_s * 1000)}", f"title={_escape(mark.title)}"]
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    """ffmetadata escapes '=', ';', '#', '\\' and newlines with a backslash."""
    return re.sub(r"([=;#\\\n])", r"\\\1", value)
