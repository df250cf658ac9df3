"""Why Realtime's GPU idles before gate_up's FP8 GEMM (2026-12-05 profile: 6.5 us each, 5.8 ms a baseline
generation; every other kernel waits ~0.4 us): `torch._scaled_mm` at the gate_up shape (rows x 1024 -> 6144) in
the output and scaling variants the model could use, each after a small elementwise kernel as after the input norm,
28 pairs per CUDA graph, us per pair in rounds; then every GPU activity (kernels, memsets, copies) of one replay of
today's variant and of qkv's, with the idle time before each.

    python -m tools.kernels.fp8_product_wait [--rows 896] [--rounds 3]

cuBLASLt's workspace comes from the environment (CUBLASLT_WORKSPACE_SIZE, KiB): run it under several values to see
whether the algorithm, and its memset, follow the workspace.

Random inputs (the timing does not depend on the values). Needs a CUDA GPU with FP8 `_scaled_mm` (sm_89+).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import torch

GATE_UP = (1024, 6144)  # K, N
PAIRS_PER_GRAPH = 28
WEIGHT_SETS = 4
TODAY = "unit scales, bf16 out (today's gate_up)"
QKV_LIKE = "rowwise scales, fp16 out (qkv's)"
HALVES = "unit scales, bf16 out, as two N/2 products (gate, up)"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=896)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.rows < 1 or args.rounds < 1:
        parser.error("--rows and --rounds must be positive")
    return args


def variants(rows: int) -> dict[str, Callable[[int], torch.Tensor]]:
    k, n = GATE_UP
    dev = "cuda"
    x = torch.randn(rows, k, device=dev, dtype=torch.float16)
    codes = (x * 8).to(torch.float8_e4m3fn)
    weights = [(torch.randn(n, k, device=dev) * 8).to(torch.float8_e4m3fn) for _ in range(WEIGHT_SETS)]
    halves_fp8 = [w.chunk(2) for w in weights]  # contiguous [N/2, K] row blocks: gate's and up's weights
    halves = [torch.randn(n, k, device=dev, dtype=torch.float16) for _ in range(WEIGHT_SETS)]
    one = torch.ones((), device=dev)
    row_scales, col_scales = torch.rand(rows, 1, device=dev) + 0.5, torch.rand(1, n, device=dev) + 0.5

    def scaled(scale_a: torch.Tensor, scale_b: torch.Tensor, out: torch.dtype) -> Callable[[int], torch.Tensor]:
        return lambda i: torch._scaled_mm(codes, weights[i].t(), scale_a=scale_a, scale_b=scale_b, out_dtype=out)

    return {
        TODAY: scaled(one, one, torch.bfloat16),
        "unit scales, fp16 out": scaled(one, one, torch.float16),
        "unit scales, fp32 out": scaled(one, one, torch.float32),
        QKV_LIKE: scaled(row_scales, col_scales, torch.float16),
        "rowwise scales, bf16 out": scaled(row_scales, col_scales, torch.bfloat16),
        HALVES: lambda i: [torch._scaled_mm(codes, half.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                           for half in halves_fp8[i]],
        "fp16 F.linear (HiFi)": lambda i: torch.nn.functional.linear(x, halves[i]),
        "_before": lambda i: x * 1.0,  # the small kernel before each GEMM, as the input norm
    }


def graph_of(gemm: Callable[[int], torch.Tensor], before: Callable[[int], torch.Tensor]) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (cuBLASLt's plans) outside the capture
        for i in range(WEIGHT_SETS):
            before(i), gemm(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(PAIRS_PER_GRAPH):
            before(i % WEIGHT_SETS), gemm(i % WEIGHT_SETS)
    return graph


def us_per_pair(graph: torch.cuda.CUDAGraph, replays: int = 30) -> float:
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / replays / PAIRS_PER_GRAPH


def activities(graph: torch.cuda.CUDAGraph, shown: int = 8) -> list[str]:
    """The first `shown` GPU activities of one replay, with their length and the idle time before each."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    lines, previous_end = [], None
    for e in events[:shown]:
        idle = "" if previous_end is None else f", {e.time_range.start - previous_end:.2f} us idle before"
        lines.append(f"    {e.name[:70]:70s} {e.time_range.end - e.time_range.start:7.2f} us{idle}")
        previous_end = e.time_range.end
    return lines


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("fp8_product_wait needs a CUDA GPU", file=sys.stderr)
        return 2
    found = variants(args.rows)
    before = found.pop("_before")
    graphs = {name: graph_of(gemm, before) for name, gemm in found.items()}
    workspace = {v: os.environ[v] for v in ("CUBLASLT_WORKSPACE_SIZE", "CUBLAS_WORKSPACE_CONFIG") if v in os.environ}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {args.rows} x {GATE_UP[0]} -> {GATE_UP[1]};"
          f" workspace settings {workspace or 'default'}")
    for round_ in range(args.rounds):
        for name, graph in graphs.items():
            print(f"round {round_}: {name}: {us_per_pair(graph):.2f} us per (small kernel + GEMM)")
    for name in (TODAY, QKV_LIKE, HALVES):
        print(f"one replay of {name}:")
        print("\n".join(activities(graphs[name])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
