"""Time app.api.voices.choose_voice against libraries of 1, 10 and 100 saved voices of 6 s (host only, no model):
a saved voice by name, by folder name, and a built-in name. Median of 200 calls, milliseconds. What it shares with
the other voice library benches is in voice_bench.py beside it. Run from a tree's root:
PYTHONPATH=$PWD python docs/bench/cpu-issue23-voice-lookup-20261206.py"""
from voice_bench import median_ms, print_versions, voice_library

from app.api.voices import choose_voice

for count in (1, 10, 100):
    with voice_library([6] * count) as library:
        middle = count // 2
        by_name = median_ms(lambda: choose_voice(library, f"voice {middle}", None), repeats=200)
        by_folder = median_ms(lambda: choose_voice(library, f"voice-{middle}", None), repeats=200)
        builtin = median_ms(lambda: choose_voice(library, "nova", None), repeats=200)
        print(f"{count:4d} voices: by name {by_name:6.2f} ms, by folder {by_folder:6.2f} ms, "
              f"built-in {builtin:6.2f} ms", flush=True)
print_versions()
