"""Peak memory for the largest inputs the engine accepts stays bounded (demo model, CPU).

Attention memory grows with the square of one item's prompt, so the worst case is every limit at
once: a 60 s reference clip with a transcript at MAX_TRANSCRIPT_CHARS, a text at MAX_TEXT_CHARS
without a single punctuation mark, the slowest speed, and the longest single item a fixed duration
can ask for. Before the limits, a 100,000-character transcript took the app past 9 GB and 10,000
characters without punctuation made one 700 s item (8 GB in build_cfg_batch).

The workload runs in a fresh interpreter (this file run as a script) so that its peak RSS is its own.
"""
import itertools
import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

# What the inputs may add to the peak once torch and the model are loaded. Measured: 924 - 426 = 498 MB (2-core
# x86-64 VM, torch 2.13 CPU, 2026-11-30); before the limits a 20,000-character transcript alone added ~2,760 MB.
# The loaded process itself is not bounded here: a CUDA build of torch maps far more at import than a CPU one.
PEAK_GROWTH_LIMIT_MB = 1_074


def largest_accepted_inputs() -> dict:
    from engine.config import SETTING_RANGES, GenerationConfig
    from engine.constants import DEMO_MODEL, SAMPLE_RATE
    from engine.engine import Engine
    from engine.lm.plan import MAX_ITEM_SECONDS
    from engine.text.limits import MAX_TEXT_CHARS, MAX_TRANSCRIPT_CHARS

    engine = Engine.load(DEMO_MODEL, device="cpu", mode="eager")
    loaded_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = np.arange(60 * SAMPLE_RATE) / SAMPLE_RATE  # the longest reference that is read
    clip = (0.2 * np.sin(2 * np.pi * 140 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))).astype(np.float32)
    words = itertools.cycle("lorem ipsum dolor sit amet consectetur adipiscing elit".split())
    text = " ".join(itertools.islice(words, MAX_TEXT_CHARS))[:MAX_TEXT_CHARS]  # no punctuation at all
    transcript = text[:MAX_TRANSCRIPT_CHARS]
    voice = engine.voice_from_clip((clip, SAMPLE_RATE), transcript=transcript, preprocess=False)
    slowest = GenerationConfig(num_step=1, seed=0, speed=SETTING_RANGES["speed"][1])
    engine.first_step_logits(text, voice, config=slowest)  # the whole-clip (CLI) path: its first item
    streamed = list(itertools.islice(engine.stream(text, voice, config=slowest), 2))  # the app's path
    longest = engine.synthesize("Hello there.", voice, config=GenerationConfig(num_step=1, seed=0,
                                                                              duration=MAX_ITEM_SECONDS - 1))
    return {"loaded_mb": loaded_mb, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "ref_frames": voice.tokens.shape[-1], "streamed_s": [len(c.audio) / SAMPLE_RATE for c in streamed],
            "longest_item_s": longest.timings.audio_s}


def test_peak_memory_for_the_largest_accepted_inputs():
    run = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=900,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["ref_frames"] >= 59 * 25 and figures["longest_item_s"] > 50, figures  # the worst case ran
    print(f"\npeak RSS {figures['peak_mb']:.0f} MB, {figures['loaded_mb']:.0f} MB of it torch + the loaded model")
    assert figures["peak_mb"] - figures["loaded_mb"] < PEAK_GROWTH_LIMIT_MB, figures


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print(json.dumps(largest_accepted_inputs()))
