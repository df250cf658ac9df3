"""Time VoiceLibrary.unused_name (the check behind every save, rename and import) against libraries of 1, 10 and
100 saved voices (host only, no model): a free name (every folder checked) and a taken one (the middle voice's
name in other case). Median of 200 calls, milliseconds. A sibling of cpu-issue23-voice-lookup-20261206.py."""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from app.library import LibraryError, VoiceLibrary
from engine.voice import Voice


def median_ms(call, repeats=200):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def refused(library, name):
    try:
        library.unused_name(name)
    except LibraryError:
        return
    raise AssertionError(f"{name} was not refused")


for count in (1, 10, 100):
    with tempfile.TemporaryDirectory() as tmp:
        library = VoiceLibrary(Path(tmp) / "voices")
        for i in range(count):
            g = torch.Generator().manual_seed(i)
            library.save(f"Voice {i}", Voice(tokens=torch.randint(0, 1024, (8, 150), generator=g),
                                             transcript=f"Voice {i}.", rms=0.08))
        free = median_ms(lambda: library.unused_name("A new voice"))
        taken = median_ms(lambda: refused(library, f"VOICE {count // 2}"))
        print(f"{count:4d} voices: free name {free:6.2f} ms, taken name {taken:6.2f} ms", flush=True)
print(sys.version.split()[0], torch.__version__)
