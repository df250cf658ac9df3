"""Time what the Clone tab's voice box and the reference clip download read of one saved voice (host only, no model):
VoiceLibrary.get (what they called before: meta.json, voice.json and the tokens loaded and checked) against
VoiceLibrary.entry (what they call now: meta.json and voice.json only), for voices of 3, 10 and 30 s in a library of
10. Median of 1000 calls, milliseconds. A sibling of cpu-voice-unused-name-20261206.py."""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from app.library import VoiceLibrary
from engine.voice import Voice


def median_ms(call, repeats=1000):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


with tempfile.TemporaryDirectory() as tmp:
    library = VoiceLibrary(Path(tmp) / "voices")
    for i, seconds in enumerate((3, 10, 30, *[3] * 7)):
        g = torch.Generator().manual_seed(i)
        library.save(f"Voice {i}", Voice(tokens=torch.randint(0, 1024, (8, 25 * seconds), generator=g),
                                         transcript=f"Voice {i}.", rms=0.08))
    for i, seconds in enumerate((3, 10, 30)):
        slug = f"voice-{i}"
        assert library.entry(slug) == library.get(slug)
        loaded = median_ms(lambda: library.get(slug))
        listed = median_ms(lambda: library.entry(slug))
        print(f"{seconds:3d} s voice: get {loaded:6.3f} ms, entry {listed:6.3f} ms", flush=True)
print(sys.version.split()[0], torch.__version__)
