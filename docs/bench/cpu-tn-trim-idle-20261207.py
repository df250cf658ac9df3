"""A short normalisation call sent as soon as a ~8,000-character run is answered, against the same call when the
child is idle (docs/latency.md): `PYTHONPATH=. python docs/bench/cpu-tn-trim-idle-20261207.py LABEL`.

2026-12-07 02:17-02:20 UTC, 2-core CPU with a CI run beside it, before / after the idle trim, two runs each:
before: idle 20.8, 23.5, 18.5 / 20.4, 16.6, 24.0 ms; right after the long run 132.8, 154.1, 213.9 /
        138.4, 169.1, 282.9 ms
after:  idle 19.2, 20.5, 39.0 / 30.7, 22.6, 20.9 ms; right after the long run 24.8, 34.4, 75.4 / 33.2, 32.8, 31.6 ms
"""
import sys
import time

from engine.text import normalize_process
from engine.text.normalize import normalize_text

SENTENCE = "She paid $1,250.75 for the 2 chairs on Dec. 4, 2026 at 7:45 a.m. "
LONG = SENTENCE * 120  # 7,800 characters
SHORT = "I have 2 cats."


def timed_short_call() -> float:
    start = time.perf_counter()
    normalize_text(SHORT, "en")
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    timed_short_call()  # the children started and their grammars loaded
    idle, after_long = [], []
    for _ in range(3):
        time.sleep(0.3)
        idle.append(timed_short_call())
        normalize_text(LONG, "en")
        after_long.append(timed_short_call())
    print(sys.argv[1], "chars", len(LONG), "short call idle ms", [round(ms, 1) for ms in idle],
          "right after the long run ms", [round(ms, 1) for ms in after_long])
    normalize_process.stop()


if __name__ == "__main__":  # the children ("spawn") import this module: they must not run it
    main()
