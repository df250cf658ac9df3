"""`launcher.py bench --batching`: what generating many sequences together buys, in one run on one GPU.

Tables: long text streamed (1, 5, 10, 30 minutes of English prose, about 150 words a minute) with the
pieces run ahead in batches against one at a time (the same engine with groups of one): wall time,
RTF, first audio, peak GPU memory; best of N (N = 1, 2, 4, 8) on the baseline line and on a 3 s line;
and batched against separate tokens on the GPU (the CUDA graphs' rounding may differ with the batch)."""
from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

import engine.engine as engine_module
from engine.config import DEFAULT_MODE, MODE_NAMES, GenerationConfig
from tools.bench import _fmt, stamp
from tools.bench_modes import ensure_random_checkpoint
from tools.workloads import LANGUAGES, SAMPLE_RATE, prose, select

MINUTES = (1, 5, 10, 30)
TAKES = (1, 2, 4, 8)
TAKE_WORKLOADS = "baseline,en-ref3-out3"


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_gib(fn) -> tuple[object, float | None]:
    """fn()'s result and the GPU memory allocated at its peak (all of it, resident included), GiB."""
    if not torch.cuda.is_available():
        return fn(), None
    _sync()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    _sync()
    return out, torch.cuda.max_memory_allocated() / 2**30


def stream_row(engine, text: str, voice, minutes: float, ahead: int) -> dict:
    """One streamed long text with groups of at most `ahead` pieces (1 = one at a time)."""
    engine_module.AHEAD_MAX = ahead
    cfg = GenerationConfig(seed=0)
    t0 = time.perf_counter()
    first = None
    audio_s = 0.0

    def run():
        nonlocal first, audio_s
        for chunk in engine.stream(text, voice, language="English", config=cfg):
            if first is None:
                first = time.perf_counter() - t0
            audio_s += len(chunk.audio) / SAMPLE_RATE
    _, peak = _peak_gib(run)
    wall = time.perf_counter() - t0
    return {"minutes": minutes, "ahead": ahead, "audio_s": audio_s, "wall_s": wall, "rtf": wall / audio_s,
            "first_audio_s": first, "peak_gib": peak}


def takes_row(engine, w, voice, n: int, repeats: int) -> dict:
    cfg = GenerationConfig(duration=w.duration, seed=0)

    def once():
        return engine.takes(w.text, voice, language=LANGUAGES[w.language], config=cfg, n=n)
    once()  # warm: this batch's bucket and kernels
    times = []
    for _ in range(repeats):
        _sync()
        t0 = time.perf_counter()
        once()
        _sync()
        times.append(time.perf_counter() - t0)
    _, peak = _peak_gib(once)
    return {"workload": w.name, "n": n, "median_s": statistics.median(times), "peak_gib": peak}


def agreement(engine, w, voice, n: int = 4) -> dict:
    """Tokens of n takes generated together against each take alone (same seeds)."""
    cfg = GenerationConfig(duration=w.duration, seed=0)
    together = engine.takes(w.text, voice, language=LANGUAGES[w.language], config=cfg, n=n)
    same = total = exact = 0
    for j, take in enumerate(together):
        alone = engine.synthesize(w.text, voice, language=LANGUAGES[w.language], config=cfg.replace(seed=j))
        a, b = torch.cat(take.tokens, dim=1), torch.cat(alone.tokens, dim=1)
        same += int((a == b).sum())
        total += a.numel()
        exact += bool(torch.equal(a, b))
    return {"workload": w.name, "n": n, "token_agreement": same / total, "takes_identical": f"{exact}/{n}"}


def stream_agreement(engine, voice, minutes: float = 1) -> dict:
    """The streamed pieces run ahead in batches against one at a time: how many come out identical."""
    cfg, text = GenerationConfig(seed=0), prose(minutes)
    default_ahead = engine_module.AHEAD_MAX
    runs = []
    for ahead in (1, default_ahead):
        engine_module.AHEAD_MAX = ahead
        runs.append([c.audio for c in engine.stream(text, voice, language="English", config=cfg)])
    engine_module.AHEAD_MAX = default_ahead
    same = sum(a.shape == b.shape and bool((a == b).all()) for a, b in zip(*runs))
    return {"workload": f"{minutes} min streamed", "n": len(runs[0]), "pieces_identical": f"{same}/{len(runs[0])}"}


def budget_check(engine) -> dict:
    """The budget's estimate of the largest bucket's step against the allocator's peak while it is captured
    and replayed (a fresh runner of that one bucket, its own graph pool)."""
    from engine.lm.runner import StaticRunner

    if engine.runner is None or not torch.cuda.is_available():
        return {}
    S = max(engine.runner.buckets)
    _sync()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    runner = StaticRunner(engine.lm, buckets=(S,), fused=engine.runner.fused)
    runner.capture(GenerationConfig())
    _sync()
    peak = torch.cuda.max_memory_allocated() - before
    del runner
    torch.cuda.empty_cache()
    return {"bucket_rows": S, "estimate_gib": engine.budget.runner_bytes(S) / 2**30, "peak_gib": peak / 2**30,
            "budget_gib": engine.budget.bytes / 2**30}


def tables(long_rows: list[dict], take_rows: list[dict], agree: list[dict]) -> str:
    lines = ["| text | pieces run | audio s | wall s | RTF | first audio ms | peak GiB |",
             "|---|---|---|---|---|---|---|"]
    for r in long_rows:
        how = "one at a time" if r["ahead"] == 1 else f"ahead, groups up to {r['ahead']}"
        lines.append(f"| {r['minutes']} min | {how} | {r['audio_s']:.0f} | {r['wall_s']:.2f} | {r['rtf']:.4f} | "
                     f"{_fmt(r['first_audio_s'] and 1e3 * r['first_audio_s'], '{:.0f}')} | "
                     f"{_fmt(r['peak_gib'], '{:.2f}')} |")
    lines += ["", "| line | N | median ms | x one take | peak GiB |", "|---|---|---|---|---|"]
    for r in take_rows:
        one = next(o for o in take_rows if o["workload"] == r["workload"] and o["n"] == 1)
        lines.append(f"| {r['workload']} | {r['n']} | {1e3 * r['median_s']:.1f} | "
                     f"{r['median_s'] / one['median_s']:.2f} | {_fmt(r['peak_gib'], '{:.2f}')} |")
    lines += ["", "| line | N | tokens equal to alone | takes identical |", "|---|---|---|---|"]
    lines += [f"| {a['workload']} | {a['n']} | {a['token_agreement']:.4%} | {a['takes_identical']} |"
              if "token_agreement" in a else f"| {a['workload']} | {a['n']} pieces | - | {a['pieces_identical']} |"
              for a in agree]
    return "\n".join(lines)


def main(args, model: str | None) -> int:
    from engine.engine import Engine

    if args.random_weights and model is None:
        model = ensure_random_checkpoint()
    mode = next((m for m in args.modes.split(",") if m in MODE_NAMES), DEFAULT_MODE.value)
    engine = Engine.load(model, device=args.device, mode=mode)
    baseline = select("baseline")[0]
    voice = engine.voice_from_clip((baseline.reference(), SAMPLE_RATE), transcript=baseline.ref_text)
    default_ahead = engine_module.AHEAD_MAX
    stream_row(engine, prose(1), voice, 1, default_ahead)  # warm every bucket a group meets
    long_rows = []
    for minutes in MINUTES:
        text = prose(minutes)
        for ahead in (1, default_ahead):
            long_rows.append(stream_row(engine, text, voice, minutes, ahead))
            print(json.dumps(long_rows[-1]), flush=True)
    engine_module.AHEAD_MAX = default_ahead
    take_rows, agree = [], []
    for w in select(TAKE_WORKLOADS):
        v = engine.voice_from_clip((w.reference(), SAMPLE_RATE), transcript=w.ref_text)
        for n in TAKES:
            take_rows.append(takes_row(engine, w, v, n, args.runs))
            print(json.dumps(take_rows[-1]), flush=True)
        agree.append(agreement(engine, w, v))
    agree.append(stream_agreement(engine, voice))
    budget = budget_check(engine)
    print(json.dumps({"budget": budget}), flush=True)
    info = stamp(engine.device, args.random_weights, "python launcher.py " + " ".join(sys.argv[1:]))
    info["mode"], info["backend"] = mode, engine.backend
    label = " [RANDOM WEIGHTS: output is noise; timings are real]" if args.random_weights else ""
    text = tables(long_rows, take_rows, agree)
    if budget:
        text += (f"\n\nMemory budget {budget['budget_gib']:.1f} GiB; largest bucket {budget['bucket_rows']} rows: "
                 f"estimated {budget['estimate_gib']:.2f} GiB, allocator peak {budget['peak_gib']:.2f} GiB")
    print(f"\n{info['gpu']} | {engine.backend} | torch {info['torch']} | commit {info['commit']} | "
          f"{info['date']}{label}")
    print(text)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-batching-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"info": info, "long": long_rows, "takes": take_rows, "agreement": agree,
                                "budget": budget}, indent=1))
    print(f"results: {path}")
    return 0
