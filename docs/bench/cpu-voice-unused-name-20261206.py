"""Time VoiceLibrary.unused_name (the check behind every save, rename and import) against libraries of 1, 10 and
100 saved voices of 6 s (host only, no model): a free name (every folder checked) and a taken one (the middle voice's
name in other case). Median of 200 calls, milliseconds. A sibling of cpu-issue23-voice-lookup-20261206.py; what they
share is in voice_bench.py beside it. Run from a tree's root:
PYTHONPATH=$PWD python docs/bench/cpu-voice-unused-name-20261206.py"""
from voice_bench import median_ms, print_versions, voice_library

from app.library import LibraryError


def refused(library, name):
    try:
        library.unused_name(name)
    except LibraryError:
        return
    raise AssertionError(f"{name} was not refused")


for count in (1, 10, 100):
    with voice_library([6] * count) as library:
        free = median_ms(lambda: library.unused_name("A new voice"), repeats=200)
        taken = median_ms(lambda: refused(library, f"VOICE {count // 2}"), repeats=200)
        print(f"{count:4d} voices: free name {free:6.2f} ms, taken name {taken:6.2f} ms", flush=True)
print_versions()
