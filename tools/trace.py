"""`launcher.py profile`: one generation under the PyTorch profiler -> a gzipped Chrome/Perfetto
trace and the breakdown the case study used (kernel count, busy fraction, categories, launch gaps)."""
from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from tools.bench_modes import load_mode
from tools.trace_stats import (
    TraceStats,
    cpu_launch_count,
    kernel_events,
    load_trace,
    stats_from_events,
)
from tools.workloads import select


def profile_call(fn: Callable[[], object], device: torch.device, trace_path: str | Path | None = None) -> TraceStats:
    """Run `fn` once under the profiler; return its kernel statistics (and keep the trace if asked)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        trace = load_trace(raw)
        stats = stats_from_events(kernel_events(trace))
        stats.cpu_launches = cpu_launch_count(trace)
        if trace_path is not None:
            trace_path = Path(trace_path)
            trace_path.parent.mkdir(parents=True, exist_ok=True)
            with open(raw, "rb") as src, gzip.open(trace_path, "wb") as dst:
                shutil.copyfileobj(src, dst)
    return stats


def main(args, model: str | None) -> int:
    (w,) = select(args.workload)
    m = load_mode(args.mode, model, args.device, random_weights=args.random_weights)
    if m is None:
        raise SystemExit(f"mode {args.mode} is not available here")
    prompt = m.prepare(w)
    m.generate(w, prompt)  # warm-up: allocations, autotuning and graph capture stay out of the trace
    stats = profile_call(lambda: m.generate(w, prompt), m.device, args.out)
    label = " [RANDOM WEIGHTS]" if args.random_weights else ""
    print(f"{m.name} ({m.backend}) on {w.name}{label}; trace: {args.out}")
    print(stats.table())
    return 0
