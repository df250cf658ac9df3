"""Time what the Clone tab's voice box and the reference clip download read of one saved voice (host only, no model):
VoiceLibrary.get (what they called before: meta.json, voice.json and the tokens loaded and checked) against
VoiceLibrary.entry (what they call now: meta.json and voice.json only), for voices of 3, 10 and 30 s in a library of
10. Median of 1000 calls, milliseconds. A sibling of cpu-voice-unused-name-20261206.py; what they share is in
voice_bench.py beside it. Run from a tree's root: PYTHONPATH=$PWD python docs/bench/cpu-voice-entry-20261206.py"""
from voice_bench import median_ms, print_versions, voice_library

with voice_library((3, 10, 30, *[3] * 7)) as library:
    for i, seconds in enumerate((3, 10, 30)):
        slug = f"voice-{i}"
        assert library.entry(slug) == library.get(slug)
        loaded = median_ms(lambda: library.get(slug), repeats=1000)
        listed = median_ms(lambda: library.entry(slug), repeats=1000)
        print(f"{seconds:3d} s voice: get {loaded:6.3f} ms, entry {listed:6.3f} ms", flush=True)
print_versions()
