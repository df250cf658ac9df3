"""FlashAttention-3's varlen forward against main's ragged attention at OmniVoice's shapes:
`python -m tools.kernels.fa3_probe.bench --library PATH [--shapes 560x290 560x290x8 150x80 120x75] [--rounds 7]
[--json F]`.

A shape is c x T [x n] as tools.kernels.bench_attention packs it (n takes of a c-row prompt and a T-row uncond
target, then pads, in the runner's bucket of S rows); FA3 gets the same packing as variable-length sequences
(cu_seqlens, one per range of keys). q, k, v are bench_attention's operands, as the model has them: q and k
written by qk_norm_rope ([rows, heads, 128], contiguous), v a view of the qkv projection's output (row stride
4096). Every library configuration runs (`configs.py`); the e4m3 one gets the same tensors cast to float8 e4m3 (no
scales) as views of one [rows, 4096] buffer laid out like the qkv output.

Checks first, each fatal: outputs poisoned with NaN, then against a float64 reference within fp16 rounding (the
suite's rule, tests/kernels/test_ragged_attention.py: at most twice PyTorch's own fp16 error plus one fp16 ulp of
the largest output); e4m3 against float64 on its fp8 inputs within 2^-3 max|v| + one bf16 ulp of the largest
output (FA3 rounds the probabilities to e4m3: a relative 2^-4 each moves an output by at most 2^-4 max|v - o|).
Each graph's output must equal the eager call's, and an fp16 call on q, k, v as views of one qkv buffer (row stride
4096 for all three) must equal the call on the model's layout. Times: us per call from CUDA-graph replays of 28
calls (one per layer); interleaved: each round times main's kernel, every FA3 configuration, main's kernel again
(`cutlass_gemm.bench.interleaved_order`), so drift shows in main's spread, and each FA3 time also has a ratio to
the mean of the main timings around it. Last, the profiler's kernel times of a few eager calls of each variant
(FA3 launches its scheduler's prepare kernel before the attention kernel on every call). Exit status 1 when a
check fails.
"""
import argparse
import json
import re
import statistics
import sys
from dataclasses import asdict, dataclass, field

import torch

from kernels.ragged_attention import ragged_attention, ragged_attention_ref
from tools.kernels.bench_attention import HEAD_DIM, N_KV_HEADS, N_Q_HEADS, layout, operands, sequence_bounds
from tools.kernels.check_realtime_gpu import replay_us
from tools.kernels.cutlass_gemm.bench import _capture, interleaved_order
from tools.kernels.fa3_probe.configs import BY_NAME
from tools.kernels.fa3_probe.library import Fa3Probe

SHAPES = ("560x290", "560x290x8", "150x80", "120x75")
CALLS = 28  # per graph replay: one per layer, as bench_attention times attention
REPLAYS = 10  # per timing
QKV_WIDTH = (N_Q_HEADS + 2 * N_KV_HEADS) * HEAD_DIM


def parse_shape(text: str) -> tuple[int, int, int]:
    """(c, T, n) of 'c x T' or 'c x T x n'."""
    parts = text.split("x")
    if len(parts) not in (2, 3) or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"a shape is CxT or CxTxN (positive integers), got {text!r}")
    c, t, n = (list(map(int, parts)) + [1])[:3]
    return c, t, n


@dataclass
class Variant:
    label: str
    config: str | None = None  # None: main's kernels.ragged_attention at its defaults
    status: str = "ok"
    us: list[float] = field(default_factory=list)
    ratio_to_main: list[float] = field(default_factory=list)  # per timing, to the mean of main's around it
    err: float | None = None
    allowed: float | None = None
    max_diff_to_main: float | None = None  # fp16 configurations only
    graph_equals_eager: bool | None = None
    views_equal: bool | None = None  # fp16 FA3: the call on views of one qkv buffer equals the model layout's
    kernels_us: dict[str, float] = field(default_factory=dict)  # the profiler's, eager calls, after the timings


def qkv_views(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """q, k, v cast to dtype in one [S, 4096] buffer laid out like the qkv projection's output."""
    qkv = torch.empty(q.shape[0], QKV_WIDTH, dtype=dtype, device=q.device)
    parts = qkv.view(q.shape[0], N_Q_HEADS + 2 * N_KV_HEADS, HEAD_DIM).split([N_Q_HEADS, N_KV_HEADS, N_KV_HEADS], 1)
    for part, source in zip(parts, (q, k, v)):
        part.copy_(source)
    return parts


def kernel_us(call, calls: int = 10) -> dict[str, float]:
    """Mean GPU time per call of each kernel `call` launches (its name up to the template arguments), from the
    profiler; a nicety: its failure is noted, not fatal."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    totals = {}
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(calls):
                call(i)
            torch.cuda.synchronize()
        for event in prof.events():
            if event.device_type.name == "CUDA":
                name = re.sub(r"<.*", "", event.name)[:60]
                totals[name] = totals.get(name, 0.0) + event.time_range.elapsed_us() / calls
    except Exception as error:
        totals[f"? ({type(error).__name__}: {error})"[:80]] = float("nan")
    return totals


def measure(probe: Fa3Probe, shape: str, rounds: int) -> dict:
    """Checks and interleaved timings of main's kernel and every FA3 configuration at one shape."""
    c, t, n = parse_shape(shape)
    torch.manual_seed(0)
    S, ranges = layout(c, t, n)
    q, k, v = operands(S)
    if v.stride(0) != QKV_WIDTH:  # qk_norm_rope writes q and k anew; v stays a view of the qkv output
        raise RuntimeError(f"v should be a view of the qkv output (row stride {QKV_WIDTH}), got {v.stride()}")
    bounds, longest = sequence_bounds(ranges)

    def reference(q, k, v):
        exact = ragged_attention_ref(q.double(), k.double(), v.double(), ranges.start, ranges.end)
        return exact, exact.abs().max().item()

    exact, exact_max = reference(q, k, v)
    torch_err = (ragged_attention_ref(q, k, v, ranges.start, ranges.end).double() - exact).abs().max().item()
    fp16_allowed = 2 * torch_err + torch.finfo(torch.float16).eps * exact_max
    q8, k8, v8 = qkv_views(q, k, v, torch.float8_e4m3fn)
    strided = qkv_views(q, k, v, torch.float16)
    exact8, exact8_max = reference(q8, k8, v8) if any(BY_NAME[name].e4m3 for name in probe.names) else (None, 0)
    variants = [Variant("main ragged_attention")] + [Variant(f"FA3 {name}", name) for name in probe.names]
    graphs, calls, main_out = {}, {}, None
    for i, variant in enumerate(variants):
        e4m3 = variant.config is not None and BY_NAME[variant.config].e4m3
        out = torch.full((S, N_Q_HEADS, HEAD_DIM), float("nan"), device="cuda",
                         dtype=torch.bfloat16 if e4m3 else torch.float16)
        if variant.config is None:
            def call(_, out=out):
                ragged_attention(q, k, v, ranges.start, ranges.end, out=out)
        else:
            inputs = (q8, k8, v8) if e4m3 else (q, k, v)

            def call(_, out=out, name=variant.config, inputs=inputs):
                probe.attention(name, *inputs, bounds, longest, out=out)
        calls[i] = call
        call(0)
        torch.cuda.synchronize()
        eager = out.clone()
        variant.err = (out.double() - (exact8 if e4m3 else exact)).abs().max().item()  # NaN stays NaN: fails below
        variant.allowed = (2 ** -3 * v8.float().abs().max().item()
                           + torch.finfo(torch.bfloat16).eps * exact8_max) if e4m3 else fp16_allowed
        if variant.config is None:
            main_out = eager
        elif not e4m3:
            variant.max_diff_to_main = (eager.float() - main_out.float()).abs().max().item()
            variant.views_equal = torch.equal(probe.attention(variant.config, *strided, bounds, longest), eager)
        graphs[i] = _capture(call, CALLS)
        out.fill_(float("nan"))  # what the graph's replay writes, not the eager calls of its capture
        graphs[i].replay()
        torch.cuda.synchronize()
        variant.graph_equals_eager = torch.equal(out, eager)
        if not variant.err <= variant.allowed or not variant.graph_equals_eager or variant.views_equal is False:
            variant.status = "FAILED"
    order = interleaved_order(len(variants), rounds)
    times = [(i, replay_us(graphs[i], REPLAYS) / CALLS) for i in order]
    for position, (i, us) in enumerate(times):
        variants[i].us.append(us)
        if i:  # a candidate: main was timed just before this round's candidates and just after them
            before = next(u for j, u in reversed(times[:position]) if j == 0)
            after = next(u for j, u in times[position:] if j == 0)
            variants[i].ratio_to_main.append(2 * us / (before + after))
    main = variants[0].us
    for i, variant in enumerate(variants):
        variant.kernels_us = kernel_us(calls[i])
    return {"shape": shape, "S": S, "sequences": len(bounds) - 1, "longest": longest, "torch_fp16_err": torch_err,
            "main_median_us": statistics.median(main),
            "main_spread": (max(main) - min(main)) / statistics.median(main),
            "variants": [asdict(v) | {"median_us": statistics.median(v.us),
                                      "median_ratio": statistics.median(v.ratio_to_main) if v.ratio_to_main else None}
                         for v in variants]}


def table(result: dict) -> list[str]:
    lines = []
    for v in result["variants"]:
        ratio = "" if v["median_ratio"] is None else f"{v['median_ratio']:.3f}"
        diff = "" if v["max_diff_to_main"] is None else f"{v['max_diff_to_main']:.2e}"
        lines.append(f"| {result['shape']} ({result['S']}) | {v['label']} | {v['median_us']:.2f} | "
                     f"{min(v['us']):.2f}-{max(v['us']):.2f} | {ratio} | {v['err']:.2e} / {v['allowed']:.2e} | "
                     f"{diff} | {v['status']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True, help="the .so build.py made")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), type=str)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="write every result here")
    args = parser.parse_args(argv)
    for shape in args.shapes:
        parse_shape(shape)  # a typo fails before the GPU work
    probe = Fa3Probe(args.library)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "library": args.library,
           "configs": probe.names, "rounds": args.rounds, "calls_per_replay": CALLS, "replays": REPLAYS}
    print(json.dumps(env))
    print("| shape (S) | variant | us median | min-max | x main (same round) | err / allowed | max diff to main | |")
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for shape in args.shapes:
        results.append(measure(probe, shape, args.rounds))
        print("\n".join(table(results[-1])), flush=True)
        for v in results[-1]["variants"]:
            print(f"  {v['label']} kernels (us per call, profiler): "
                  + ", ".join(f"{name} {us:.2f}" for name, us in v["kernels_us"].items()), flush=True)
        if args.json:  # after every shape: a crash later keeps what was measured
            with open(args.json, "w") as f:
                json.dump({"env": env, "shapes": results}, f, indent=1)
    failed = [(r["shape"], v["label"]) for r in results for v in r["variants"] if v["status"] != "ok"]
    if failed:
        print(f"FAILED checks: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
