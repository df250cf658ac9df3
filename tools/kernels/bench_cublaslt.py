"""cuBLASLt algorithms we choose vs torch.mm for the LM's four projections (issue 22 targets 1-3).

    python -m tools.kernels.bench_cublaslt [--rows 320 896 ...] [--dtype fp16 fp8] [--grid 96] [--out DIR]

Per projection (tools.kernels.check_w4a4_cuda.SHAPES) and number of rows M, with RANDOM operands:
1. lists `tools.kernels.cublaslt.LtMatmul`'s candidates (the heuristic's results, split-K variants of its first;
   with --grid the AlgoInit grid too);
2. checks each against float64: within fp16 rounding (`kernels.numerics.fp16_rounding_ratio` <= 1, as the
   kernel tests hold GEMMs to); FP8 with the accumulation bound of FP8 tensor cores added (`kernels/fp8_ref.py`).
   A candidate that fails or errors is reported and never chosen;
3. screens the correct ones with a short CUDA-graph timing (8 weight sets), then times the fastest few, the
   default (the heuristic's first; not always what torch.mm runs) and torch.mm (fp8: rowwise torch._scaled_mm) with
   `check_realtime_gpu.graph_us`; `cublaslt.choose` picks.
Writes one JSON line per shape (every candidate with its check and times) to DIR/cublaslt.jsonl, prints a table
(best vs torch per shape, with the algorithm's config) and the per-layer sums at 320 and 896 rows.
"""
import argparse
import glob
import json
import math
import os
import re
import sys
import time
from dataclasses import asdict
from functools import cache

import torch

from kernels.fp8 import accumulator_bits, scaled_mm_rowwise
from kernels.fp8_ref import fp8_sum_and_bound, quantize_rows_fp8_ref
from kernels.numerics import fp16_rounding_ratio
from tools.kernels import cublaslt
from tools.kernels.check_realtime_gpu import COPIES, graph_us
from tools.kernels.check_w4a4_cuda import LAYERS, SHAPES

ROWS = [128, 192, 256, 320, 384, 512, 640, 896, 1280]
SUM_ROWS = (320, 896)  # a 3 s output's rows and the baseline's
FINALISTS = 6  # candidates timed in full after the screen, besides the default
STEPS = 32


def reference(x: torch.Tensor, w: torch.Tensor, x_scales: torch.Tensor | None = None,
              w_scales: torch.Tensor | None = None, acc_bits: int | None = None) -> tuple:
    """`fp16_rounding_ratio`'s (ref32, ref16, slack) for y = x @ w^T from float64 (times the scales' outer
    product for e4m3 operands, whose slack is the FP8 accumulation bound for acc_bits; none for fp16)."""
    if x_scales is None:
        exact = x.double() @ w.double().t()
        return exact.float(), exact.half(), None
    exact, bound = fp8_sum_and_bound(x, w, acc_bits)
    outer = x_scales.double()[:, None] * w_scales.double()[None, :]  # [M, N]
    exact = exact * outer
    return exact.float(), exact.half(), bound * outer


@cache
def _enum_names() -> dict[str, dict[int, str]]:
    """Tile, stages and cluster names by id from a cublasLt.h beside the library (the nvidia-cublas wheel), if any."""
    names = {"TILE": {}, "STAGES": {}, "CLUSTER_SHAPE": {}}
    for root in sys.path:
        for header in glob.glob(os.path.join(root, "nvidia", "**", "include", "cublasLt.h"), recursive=True):
            text = open(header).read()
            for kind, table in names.items():
                prefix = "CUBLASLT_CLUSTER_SHAPE_" if kind == "CLUSTER_SHAPE" else f"CUBLASLT_MATMUL_{kind}_"
                table.update({int(v): n for n, v in re.findall(rf"{prefix}(\w+) = (\d+)", text)})
            return names
    return names


def describe(config: cublaslt.AlgoConfig) -> str:
    names = _enum_names()
    split = f" split {config.splitk} red {config.reduction}" if config.splitk > 1 else ""
    return (f"algo {config.algo_id} tile {names['TILE'].get(config.tile, config.tile)} stages "
            f"{names['STAGES'].get(config.stages, config.stages)}{split} swz {config.swizzle} cluster "
            f"{names['CLUSTER_SHAPE'].get(config.cluster_shape, config.cluster_shape)} custom {config.custom}")


def operands(m: int, n: int, k: int, fp8: bool, seed: int) -> dict:
    """x, COPIES weight sets and, for FP8, their scales, and torch's call for the same GEMM: torch(i, out) -> y."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, k, device="cuda", generator=g)
    ws = [torch.randn(n, k, device="cuda", generator=g) / math.sqrt(k) for _ in range(COPIES)]
    if not fp8:
        x, ws = x.half(), [w.half() for w in ws]
        return {"x": x, "ws": ws, "x_scales": None, "w_scales": [None] * COPIES,
                "torch": lambda i, out: torch.mm(x, ws[i].t(), out=out)}
    x, x_scales = quantize_rows_fp8_ref(x)
    quantized = [quantize_rows_fp8_ref(w) for w in ws]
    ws, w_scales = [q[0] for q in quantized], [q[1] for q in quantized]

    def scaled_mm(i: int, out: torch.Tensor) -> torch.Tensor:  # what the engine runs; `out` is not used
        return scaled_mm_rowwise(x, x_scales, ws[i], w_scales[i], torch.float16)

    return {"x": x, "ws": ws, "x_scales": x_scales, "w_scales": w_scales, "torch": scaled_mm}


def bench_shape(name: str, m: int, n: int, k: int, fp8: bool, acc_bits: int | None, grid: int) -> dict:
    ops = operands(m, n, k, fp8, seed=m * 7 + n + k)
    out = torch.empty(m, n, dtype=torch.float16, device="cuda")
    record = {"projection": name, "m": m, "n": n, "k": k, "dtype": "fp8" if fp8 else "fp16"}
    try:
        lt = cublaslt.LtMatmul(m, n, k, dtype=torch.float8_e4m3fn if fp8 else torch.float16)
        start = time.perf_counter()
        candidates = lt.candidates(grid_limit=grid)
        record["list_s"] = round(time.perf_counter() - start, 3)
    except RuntimeError as e:
        record["error"] = str(e)
        return record

    def run(candidate, i: int) -> None:
        lt(ops["x"], ops["ws"][i], candidate, out=out, x_scales=ops["x_scales"], w_scales=ops["w_scales"][i])

    ref = reference(ops["x"], ops["ws"][0], ops["x_scales"], ops["w_scales"][0], acc_bits)
    record["torch_ratio"] = fp16_rounding_ratio(ops["torch"](0, out), *ref)
    rows = []
    for candidate in candidates:
        row = {"source": candidate.source, "config": asdict(candidate.config), "describe": describe(candidate.config),
               "workspace": candidate.workspace, "waves": round(candidate.waves, 3)}
        try:
            out.fill_(float("nan"))
            run(candidate, 0)
            row["ratio"] = fp16_rounding_ratio(out, *ref)
            row["correct"] = row["ratio"] <= 1  # NaN (a tile left unwritten) fails too
            if row["correct"]:
                row["screen_us"] = graph_us(lambda i, c=candidate: run(c, i), calls=COPIES, replays=3)
        except RuntimeError as e:
            row["correct"], row["error"] = False, str(e)
        rows.append((candidate, row))
    screened = sorted((r for r in rows if r[1]["correct"]), key=lambda r: r[1]["screen_us"])
    finalists = screened[:FINALISTS] + [r for r in screened[FINALISTS:] if r[0].is_default]
    torch_us = [graph_us(lambda i: ops["torch"](i, out))]
    trials = []
    for candidate, row in finalists:
        row["us"] = graph_us(lambda i, c=candidate: run(c, i))
        trials.append(cublaslt.Trial(candidate, True, row["us"]))
    torch_us.append(graph_us(lambda i: ops["torch"](i, out)))
    chosen = cublaslt.choose(trials)
    record.update(torch_us=torch_us, listed=len(candidates), correct=len(screened),
                  candidates=[r for _, r in rows])
    default = next((r for c, r in finalists if c.is_default), None)
    record["default_us"] = default["us"] if default else None
    if chosen is not None:
        record["chosen"] = {"source": chosen.candidate.source, "us": chosen.us,
                            "describe": describe(chosen.candidate.config)}
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=ROWS)
    parser.add_argument("--dtype", nargs="+", default=["fp16"], choices=["fp16", "fp8"])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--grid", type=int, default=0, help="also time this many AlgoInit grid configurations")
    args = parser.parse_args()
    reason = cublaslt.unavailable_reason()
    if reason is not None:
        sys.exit(f"cuBLASLt is not available: {reason}")
    props = torch.cuda.get_device_properties(0)
    header = {"gpu": props.name, "torch": torch.__version__, "cublaslt_version": cublaslt.version(),
              "driver": torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(json.dumps(header))
    path = os.path.join(args.out, "cublaslt.jsonl")
    sums: dict[tuple[str, int], list[float]] = {}
    with open(path, "a") as jsonl:
        for dtype in args.dtype:
            fp8 = dtype == "fp8"
            acc_bits = None
            if fp8:
                acc_bits = accumulator_bits(torch.device("cuda"))
            print(f"\n{dtype}: | projection | M | torch us | default Lt us | best us | x torch | chosen | "
                  "correct / listed | list s |")
            for m in args.rows:  # rows outside: a run cut short still has every projection of the first rows
                for name, k, n in SHAPES:
                    record = {**header, **bench_shape(name, m, n, k, fp8, acc_bits, args.grid)}
                    jsonl.write(json.dumps(record) + "\n")
                    jsonl.flush()
                    if "chosen" not in record:
                        print(f"| {name} | {m} | ERROR {record.get('error', 'no correct candidate')} |", flush=True)
                        continue
                    torch_us, best = sum(record["torch_us"]) / 2, record["chosen"]["us"]
                    default = f"{record['default_us']:.2f}" if record["default_us"] else "-"
                    print(f"| {name} | {m} | {torch_us:.2f} | {default} | {best:.2f} | {best / torch_us:.3f} | "
                          f"{record['chosen']['source']}: {record['chosen']['describe']} | {record['correct']} / "
                          f"{record['listed']} | {record['list_s']} |", flush=True)
                    if m in SUM_ROWS:
                        sums.setdefault((dtype, m), []).append((torch_us, best))
    for (dtype, m), pairs in sums.items():
        if len(pairs) == len(SHAPES):
            before, after = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
            print(f"{dtype} M={m}: per layer torch {before:.2f} us, chosen {after:.2f} us ({after / before:.3f}); "
                  f"x {LAYERS} layers x {STEPS} steps: {before * LAYERS * STEPS / 1000:.2f} -> "
                  f"{after * LAYERS * STEPS / 1000:.2f} ms")


if __name__ == "__main__":
    main()
