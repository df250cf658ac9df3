"""Measure how well the take checks separate good audio from bad on REAL recordings, with the real
models (Whisper and the speaker model must be on this computer). Tests only use tiny random
models, so this script is where the thresholds' accuracy is measured.

    python -m tools.calibrate_checks DIR [--device cuda] [--out report.json]

DIR holds one folder per speaker, each with clips and their transcripts: DIR/<speaker>/<name>.wav
and DIR/<speaker>/<name>.txt (any format soundfile reads; at least two speakers, two clips each).
Measured:
  words   WER of each clip against its own transcript (good: should pass) and against the
          transcript with one word dropped and one repeated (bad: should fail);
  voice   similarity of every same-speaker pair (should pass) and different-speaker pair (should
          fail), the equal error rate and the threshold where it occurs;
  signal  each clip as is (should pass), with a 2 s pause, an 80 ms dropout, or 4x gain (clipped).
For each check: the pass rate on good material and the fail rate on bad material at the current
thresholds, so the defaults in engine/checks/verdict.py can be judged and changed.
"""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from engine.audio.io import load_clip
from engine.checks.checker import Checker
from engine.checks.signal import check_signal
from engine.checks.verdict import Thresholds
from engine.checks.voice import similarity
from engine.checks.words import check_words
from engine.constants import SAMPLE_RATE


def read_corpus(root: Path) -> dict[str, list[tuple[np.ndarray, str]]]:
    corpus = {}
    for speaker in sorted(p for p in root.iterdir() if p.is_dir()):
        clips = [(load_clip(str(t.with_suffix(s))).samples, t.read_text(encoding="utf-8").strip())
                 for t in sorted(speaker.glob("*.txt")) for s in (".wav", ".flac", ".mp3", ".ogg")
                 if t.with_suffix(s).is_file()]
        if clips:
            corpus[speaker.name] = clips
    if len(corpus) < 2 or any(len(c) < 2 for c in corpus.values()):
        raise SystemExit(f"{root}: need at least two speaker folders with two clips (+ .txt) each")
    return corpus


def damaged_text(text: str) -> str:
    """The transcript with its second word dropped and its last word said twice."""
    words = text.split()
    return " ".join(words[:1] + words[2:] + words[-1:]) if len(words) > 2 else text + " " + text


def damaged_audio(wave: np.ndarray) -> dict[str, np.ndarray]:
    mid = len(wave) // 2
    dropout = wave.copy()
    dropout[mid:mid + int(0.08 * SAMPLE_RATE)] = 0
    return {"pause": np.concatenate([wave[:mid], np.zeros(2 * SAMPLE_RATE, np.float32), wave[mid:]]),
            "dropout": dropout, "clipping": np.clip(wave * 4 / max(np.abs(wave).max(), 1e-6), -1, 1)}


def rate(flags: list[bool]) -> float | None:
    return float(np.mean(flags)) if flags else None


def equal_error(same: list[float], different: list[float]) -> tuple[float, float]:
    """(EER, threshold): the threshold where rejecting the same speaker is about as frequent as
    accepting a different one, and that error rate."""
    same_a, different_a = np.array(same), np.array(different)
    candidates = np.unique(np.concatenate([same_a, different_a]))
    frr = np.array([(same_a < t).mean() for t in candidates])
    far = np.array([(different_a >= t).mean() for t in candidates])
    i = int(np.argmin(np.abs(frr - far)))
    return float((frr[i] + far[i]) / 2), float(candidates[i])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    th = Thresholds()
    checker = Checker.load(args.device)
    if checker.unavailable:
        raise SystemExit("The real models are needed: " + "; ".join(checker.unavailable.values()))
    corpus = read_corpus(args.folder)
    clips = [(speaker, wave, text) for speaker, items in corpus.items() for wave, text in items]

    heard = [checker.transcribe(wave, SAMPLE_RATE) or "" for _, wave, _ in clips]
    wer_good = [check_words(text, h, th.max_wer) for (_, _, text), h in zip(clips, heard)]
    wer_bad = [check_words(damaged_text(text), h, th.max_wer) for (_, _, text), h in zip(clips, heard)]

    emb = [checker.embed(wave, SAMPLE_RATE) for _, wave, _ in clips]
    same, different = [], []
    for i, j in itertools.combinations(range(len(clips)), 2):
        (same if clips[i][0] == clips[j][0] else different).append(similarity(emb[i], emb[j]))
    eer, eer_threshold = equal_error(same, different)

    signal_good = [all(c.passed for c in check_signal(w, SAMPLE_RATE, th)) for _, w, _ in clips]
    signal_bad = {kind: [] for kind in ("pause", "dropout", "clipping")}
    for _, wave, _ in clips:
        for kind, bad in damaged_audio(wave).items():
            found = {c.name: c for c in check_signal(bad, SAMPLE_RATE, th)}
            signal_bad[kind].append(not found[{"pause": "pauses", "dropout": "dropouts"}.get(kind, kind)].passed)

    report = {
        "clips": len(clips), "speakers": len(corpus), "thresholds": th.__dict__,
        "words": {"wer_good": [c.score for c in wer_good], "pass_rate_good": rate([c.passed for c in wer_good]),
                  "fail_rate_damaged_text": rate([not c.passed for c in wer_bad])},
        "voice": {"same_speaker": same, "different_speaker": different, "eer": eer, "eer_threshold": eer_threshold,
                  "pass_rate_same": rate([s >= th.min_similarity for s in same]),
                  "fail_rate_different": rate([s < th.min_similarity for s in different])},
        "signal": {"pass_rate_clean": rate(signal_good),
                   **{f"fail_rate_{kind}": rate(flags) for kind, flags in signal_bad.items()}},
    }
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text)
    summary = {k: {m: v for m, v in report[k].items() if not isinstance(v, list)} for k in ("words", "voice", "signal")}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
