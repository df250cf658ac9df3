"""Time what one page load lists of the saved voices (the Clone tab's voice_choices + saved_voice, as layout.py's
page-load callback calls them) and what GET /v1/audio/voices builds (app/api/voices.py list_voices, called directly,
no HTTP), host only, no model, in libraries of 1, 10 and 100 voices of 10 s (random tokens). Run it from the root of
each tree to compare (before and after a7455c8): PYTHONPATH=$PWD python docs/bench/cpu-voice-list-20261206.py.
Median of max(20, 1000 // voices) calls, milliseconds. A sibling of cpu-voice-entry-20261206.py; what they share is
in voice_bench.py beside it."""
from types import SimpleNamespace

from voice_bench import median_ms, print_versions, voice_library

from app.api.voices import list_voices
from app.ui.clone import saved_voice, voice_choices

for count in (1, 10, 100):
    with voice_library([10] * count) as library:
        ctx = SimpleNamespace(library=library, settings=SimpleNamespace(last_voice="voice-0"))
        assert len(voice_choices(ctx)) == count + 1 and saved_voice(ctx) == "voice-0"
        repeats = max(20, 1000 // count)
        page = median_ms(lambda: (voice_choices(ctx), saved_voice(ctx)), repeats=repeats)
        listed = median_ms(lambda: list_voices(library), repeats=repeats)
        print(f"{count:4d} voices: page load {page:8.3f} ms, GET voices list {listed:8.3f} ms", flush=True)
print_versions()
