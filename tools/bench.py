"""`launcher.py bench`: every mode side by side on the fixed workload set, in one run on one GPU.

Per mode and workload: median, p90 (and p90 / median: how steady it is) and spread of end-to-end time
(generation + decode, voice prompt prepared beforehand; reference encoding reported separately), RTF,
time to first audio when streaming, CUDA kernels per generation, GPU busy fraction, peak GPU memory,
load/warm-up/capture time, and fidelity against our fp32 eager path with deterministic settings
(position_temperature=0): token agreement, mel distance, step-0 logits cosine. Ratios to upstream and to our
eager FP16."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from tqdm.auto import tqdm

from tools.bench_modes import ModeUnderTest, load_mode
from tools.provenance import commit_id
from tools.trace import profile_call
from tools.workloads import Workload, select


@dataclass
class Row:
    mode: str
    backend: str
    workload: str
    audio_s: float
    times_s: list[float]
    median_s: float
    spread_s: tuple[float, float]
    p90_s: float
    rtf: float
    first_audio_s: float | None
    ref_encode_s: float
    kernels: int | None = None
    cpu_launches: int | None = None
    busy_fraction: float | None = None
    peak_mem_gib: float | None = None
    load_s: float = 0.0
    capture_s: float | None = None
    token_agreement: float | None = None
    mel_distance_db: float | None = None
    logits_cosine: float | None = None
    step0_agreement: float | None = None
    ratios: dict[str, float] = field(default_factory=dict)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_workload(modes: dict[str, ModeUnderTest], w: Workload, runs: int, warmup: int) -> list[Row]:
    """All modes on one workload, their timed runs interleaved (run i of every mode, then run i + 1):
    drift of the host's speed then hits every mode alike, so the ratios are fair."""
    prompts, encode_s = {}, {}
    for name, m in modes.items():
        encode_s[name], prompts[name] = _timed(lambda: (m.prepare(w), _sync(m.device))[0])
        for _ in range(warmup):
            m.generate(w, prompts[name])
    times: dict[str, list[float]] = {name: [] for name in modes}
    audio_s: dict[str, float] = {}
    for _ in range(runs):
        for name, m in modes.items():
            _sync(m.device)
            dt, audio = _timed(lambda: (m.generate(w, prompts[name]), _sync(m.device))[0])
            times[name].append(dt)
            audio_s[name] = len(audio) / m.sample_rate
    rows = []
    for name, m in modes.items():
        med = statistics.median(times[name])
        row = Row(mode=name, backend=m.backend, workload=w.name, audio_s=audio_s[name], times_s=times[name],
                  median_s=med, spread_s=(min(times[name]), max(times[name])), p90_s=p90(times[name]),
                  rtf=med / audio_s[name] if audio_s[name] else float("nan"),
                  first_audio_s=m.first_audio(w, prompts[name]), ref_encode_s=encode_s[name], load_s=m.load_s,
                  capture_s=m.capture_s)
        if m.device.type == "cuda":
            row.peak_mem_gib = (m.resident_bytes + _working_bytes(m, w, prompts[name])) / 2**30
            stats = profile_call(lambda: m.generate(w, prompts[name]), m.device)
            row.kernels, row.busy_fraction, row.cpu_launches = stats.kernels, stats.busy_fraction, stats.cpu_launches
        rows.append(row)
    return rows


def p90(values: list[float]) -> float:
    """The 90th percentile (linear interpolation between the closest ranks; the max below 2 values)."""
    if len(values) < 2:
        return max(values)
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def _working_bytes(m: ModeUnderTest, w: Workload, prompt) -> int:
    """Peak memory one generation adds on top of what is allocated before it."""
    _sync(m.device)
    before = torch.cuda.memory_allocated(m.device)
    torch.cuda.reset_peak_memory_stats(m.device)
    m.generate(w, prompt)
    _sync(m.device)
    return torch.cuda.max_memory_allocated(m.device) - before


def add_fidelity(rows: list[Row], modes: dict[str, ModeUnderTest], reference: ModeUnderTest,
                 workloads: list[Workload]) -> None:
    from engine.checks.fidelity import mel_distance_db, token_agreement
    from tools.fidelity import logits_cosine, step0_argmax_agreement

    for w in workloads:
        ref_prompt = reference.prepare(w)
        ref_tokens, ref_audio, ref_logits = reference.deterministic(w, ref_prompt)
        for row in (r for r in rows if r.workload == w.name):
            m = modes[row.mode]
            tokens, audio, logits = m.deterministic(w, m.prepare(w))
            row.token_agreement = token_agreement(tokens, ref_tokens)
            row.mel_distance_db = mel_distance_db(audio, ref_audio, m.sample_rate)
            row.logits_cosine = logits_cosine(logits, ref_logits)
            row.step0_agreement = step0_argmax_agreement(logits, ref_logits)


def add_ratios(rows: list[Row]) -> None:
    by_key = {(r.mode, r.workload): r for r in rows}
    for r in rows:
        for base in ("upstream", "eager"):
            b = by_key.get((base, r.workload))
            if b is not None and r.median_s > 0:
                r.ratios[f"speedup_vs_{base}"] = b.median_s / r.median_s


def _fmt(v, pattern="{:.3f}") -> str:
    return "-" if v is None else pattern.format(v)


def summary(rows: list[Row]) -> str:
    """Per mode, means over the workloads (token agreement is chaotic per workload with random weights)."""
    lines = ["| mode | backend | mean RTF | worst p90/median | mean x upstream | mean x eager | mean tok agree | "
             "mean step-0 argmax agree | mean mel dB |", "|---|---|---|---|---|---|---|---|---|"]
    for mode in dict.fromkeys(r.mode for r in rows):
        rs = [r for r in rows if r.mode == mode]

        def mean(values):
            values = [v for v in values if v is not None]
            return sum(values) / len(values) if values else None
        lines.append(f"| {mode} | {rs[0].backend} | {_fmt(mean(r.rtf for r in rs), '{:.4f}')} | "
                     f"{max(r.p90_s / r.median_s for r in rs):.3f} | "
                     f"{_fmt(mean(r.ratios.get('speedup_vs_upstream') for r in rs), '{:.2f}')} | "
                     f"{_fmt(mean(r.ratios.get('speedup_vs_eager') for r in rs), '{:.2f}')} | "
                     f"{_fmt(mean(r.token_agreement for r in rs), '{:.2%}')} | "
                     f"{_fmt(mean(r.step0_agreement for r in rs), '{:.3%}')} | "
                     f"{_fmt(mean(r.mel_distance_db for r in rs), '{:.2f}')} |")
    return "\n".join(lines)


def table(rows: list[Row]) -> str:
    head = ("| mode | workload | audio s | median ms (min-max) | p90 ms | p90/median | RTF | first audio ms | "
            "kernels | CPU launches | busy | peak GiB | x upstream | x eager | tok agree | step-0 argmax agree | "
            "mel dB | 1 - logit cos |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r.mode} | {r.workload} | {r.audio_s:.2f} | {1e3 * r.median_s:.1f} "
            f"({1e3 * r.spread_s[0]:.0f}-{1e3 * r.spread_s[1]:.0f}) | {1e3 * r.p90_s:.1f} | "
            f"{r.p90_s / r.median_s:.3f} | "
            f"{r.rtf:.4f} | "
            f"{_fmt(r.first_audio_s and 1e3 * r.first_audio_s, '{:.0f}')} | {_fmt(r.kernels, '{:d}')} | "
            f"{_fmt(r.cpu_launches, '{:d}')} | "
            f"{_fmt(r.busy_fraction, '{:.0%}')} | {_fmt(r.peak_mem_gib, '{:.2f}')} | "
            f"{_fmt(r.ratios.get('speedup_vs_upstream'), '{:.2f}')} | "
            f"{_fmt(r.ratios.get('speedup_vs_eager'), '{:.2f}')} | "
            f"{_fmt(r.token_agreement, '{:.2%}')} | {_fmt(r.step0_agreement, '{:.3%}')} | "
            f"{_fmt(r.mel_distance_db, '{:.2f}')} | "
            f"{_fmt(r.logits_cosine and 1 - r.logits_cosine, '{:.1e}')} |")
    return "\n".join(lines)


def stamp(device: torch.device, random_weights: bool, command: str) -> dict:
    info = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "torch": torch.__version__,
            "command": command, "random_weights": random_weights, "device": str(device),
            "commit": commit_id()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        try:
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True).stdout.strip()
        except OSError:
            info["driver"] = "unknown"
    else:
        info["gpu"] = "none (CPU)"
    return info


def main(args, model: str | None) -> int:
    workloads = select(args.workloads)
    mode_names = [m for m in args.modes.split(",") if m]
    command = "python launcher.py " + " ".join(sys.argv[1:])
    modes: dict[str, ModeUnderTest] = {}
    rows: list[Row] = []
    label = " [RANDOM WEIGHTS: output is noise; timings are real]" if args.random_weights else ""
    for name in mode_names:
        try:
            m = load_mode(name, model, args.device, random_weights=args.random_weights)
        except Exception:  # one broken mode must not cost the figures of the others
            print(f"mode {name} FAILED to load:\n{traceback.format_exc()}", file=sys.stderr)
            continue
        if m is None:
            print(f"skipping mode {name}: not available here", file=sys.stderr)
            continue
        modes[name] = m
    for w in tqdm(workloads, desc=f"workloads{label}", unit="workload"):
        rows.extend(bench_workload(modes, w, args.runs, args.warmup))
    device = next(iter(modes.values())).device if modes else torch.device("cpu")
    reference = load_mode("fp32", model, args.device, random_weights=args.random_weights)
    add_fidelity(rows, modes, reference, workloads)
    add_ratios(rows)
    info = stamp(device, args.random_weights, command)
    text = table(rows) + "\n\n" + summary(rows)
    print(f"\n{info['gpu']} | torch {info['torch']} | commit {info['commit']} | {info['date']}{label}")
    print(text)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"info": info, "rows": [asdict(r) for r in rows]}, indent=1))
    print(f"results: {path}")
    if args.append_md:
        with open(args.append_md, "a", encoding="utf-8") as f:
            f.write(f"\n## {info['date']} — {info['gpu']} (driver {info.get('driver', '-')}), torch {info['torch']}, "
                    f"commit {info['commit']}{label}\n\n`{command}`\n\n{text}\n")
    return 0
