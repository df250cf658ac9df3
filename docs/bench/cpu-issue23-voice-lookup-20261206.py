"""Time app.api.voices.choose_voice against libraries of 1, 10 and 100 saved voices (host only, no model):
a saved voice by name, by folder name, and a built-in name. Median of 200 calls, milliseconds."""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from app.api.voices import choose_voice
from app.library import VoiceLibrary
from engine.voice import Voice


def median_ms(call, repeats=200):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


for count in (1, 10, 100):
    with tempfile.TemporaryDirectory() as tmp:
        library = VoiceLibrary(Path(tmp) / "voices")
        for i in range(count):
            g = torch.Generator().manual_seed(i)
            library.save(f"Voice {i}", Voice(tokens=torch.randint(0, 1024, (8, 150), generator=g),
                                             transcript=f"Voice {i}.", rms=0.08))
        middle = count // 2
        by_name = median_ms(lambda: choose_voice(library, f"voice {middle}", None))
        by_folder = median_ms(lambda: choose_voice(library, f"voice-{middle}", None))
        builtin = median_ms(lambda: choose_voice(library, "nova", None))
        print(f"{count:4d} voices: by name {by_name:6.2f} ms, by folder {by_folder:6.2f} ms, "
              f"built-in {builtin:6.2f} ms", flush=True)
print(sys.version.split()[0], torch.__version__)
