"""Time what one page load lists of the saved voices (the Clone tab's voice_choices + saved_voice, as layout.py's
page-load callback calls them) and what GET /v1/audio/voices builds (app/api/voices.py list_voices, called directly,
no HTTP), host only, no model, in libraries of 1, 10 and 100 voices of 10 s (random tokens). Run it from the root of
each tree to compare (before and after a7455c8). Median of max(20, 1000 // voices) calls, milliseconds. A sibling of
cpu-voice-entry-20261206.py."""
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from app.api.voices import list_voices
from app.library import VoiceLibrary
from app.ui.clone import saved_voice, voice_choices
from engine.voice import Voice


def median_ms(call, repeats):
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
            library.save(f"Voice {i}", Voice(tokens=torch.randint(0, 1024, (8, 250), generator=g),
                                             transcript=f"Voice {i}.", rms=0.08))
        ctx = SimpleNamespace(library=library, settings=SimpleNamespace(last_voice="voice-0"))
        assert len(voice_choices(ctx)) == count + 1 and saved_voice(ctx) == "voice-0"
        repeats = max(20, 1000 // count)
        page = median_ms(lambda: (voice_choices(ctx), saved_voice(ctx)), repeats)
        listed = median_ms(lambda: list_voices(library), repeats)
        print(f"{count:4d} voices: page load {page:8.3f} ms, GET voices list {listed:8.3f} ms", flush=True)
print(sys.version.split()[0], torch.__version__)
