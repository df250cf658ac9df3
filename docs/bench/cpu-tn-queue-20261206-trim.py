"""What glibc's malloc_trim(0) costs and gives back after a WeTextProcessing run (normalize_process._memory_giver,
which the child calls after each answer): English texts of several lengths normalised in this process, each run's
time, then the resident memory before and after the trim and the trim's time. Linux, the tn extra.

    PYTHONPATH=. python docs/bench/cpu-tn-queue-20261206-trim.py
"""
import os
import time

from engine.text.normalize import wetext_grammar
from engine.text.normalize_process import _memory_giver
from tools.bench_tn import bench_text
from tools.bench_tn_threads import resident_mb

grammar, give_back_memory = wetext_grammar("english"), _memory_giver()
grammar("I have 2 cats.")
print(f"loaded: resident {resident_mb(os.getpid())[0]:.0f} MB")
print("| characters | run (s) | resident after the run (MB) | after the trim (MB) | trim (ms) |")
print("|---|---|---|---|---|")
for chars in (150, 400, 700, 2000, 8000):
    t0 = time.perf_counter()
    grammar(bench_text(chars))
    run_s = time.perf_counter() - t0
    before = resident_mb(os.getpid())[0]
    t0 = time.perf_counter()
    give_back_memory()
    trim_ms = (time.perf_counter() - t0) * 1000
    print(f"| {chars:,} | {run_s:.3f} | {before:.0f} | {resident_mb(os.getpid())[0]:.0f} | {trim_ms:.1f} |")
