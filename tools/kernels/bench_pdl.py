"""What programmatic dependent launch (PDL) would save between the step's kernels (issue 22 targets 2 and 3).

    python -m tools.kernels.bench_pdl [--rows 320 896] [--kernels 64] [--rounds 5] [--replays 20] [--json PATH]
                                      [--dot DIR]   (GPU only: exit status 2 without CUDA or below sm_90)

A decoder layer at small M is ~10 kernels of a few microseconds each; between two of them the GPU drains the
first grid, flushes its writes, then launches and ramps up the next. With PDL (Hopper and later) a kernel
launched with `launch_pdl=True` (Triton 3.6: a compile option, `CUDAOptions.launch_pdl`, that makes the launcher
set CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) may start while its predecessor still runs: it waits
(`gdc_wait`, PTX griddepcontrol.wait) for the predecessor's completion and memory flush before touching memory, and
a predecessor may let its dependents launch early (`gdc_launch_dependents`).

Chains of --kernels kernels, each reading what the last one wrote (two buffers in turn), replayed from one CUDA
graph (torch.cuda.graph): an RMSNorm-like row kernel of [M, 1024] fp16 (T) repeated in a pattern with a cuBLAS
[M, 1024] x [1024, 1024] fp16 GEMM (G): "T" alone, "TG" alternating, and "TTG" (one Triton-to-Triton boundary per
GEMM, as qk_norm_rope -> attention in a layer whose other boundaries all touch a GEMM). Variants:
- plain: no PDL;
- pdl: every Triton kernel launched with PDL, its `gdc_wait` first;
- pdl+trigger: the same, each Triton kernel also calling `gdc_launch_dependents` at once;
- pdl after Triton: only a Triton kernel that follows a Triton kernel is launched with PDL (its wait first), and
  only a Triton kernel followed by one triggers: the GEMMs' neighbours launch as today.
Every variant's final tensor is checked bitwise against the plain chain's (same kernels, same order of work): exit
status 1 if one differs. Timing: the variants' graphs replayed in turn, --rounds times (each round the median of
--replays replays, `check_realtime_gpu.replay_us`), the median round reported: us per replay and per kernel.
--dot writes each graph's CUDA debug DOT (`CUDAGraph.debug_dump`, verbose): whether the capture kept programmatic
edges. About a minute (an estimate: this version not yet run on a GPU).
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from kernels._triton import tl, triton
from tools.kernels.check_realtime_gpu import replay_us
from tools.provenance import commit_id

N_COLS = 1024  # the model's hidden size
ROWS = (320, 896)  # a 3 s output's bucket, the baseline's
CHAINS = {"norm": "T", "norm, GEMM": "TG", "norm, norm, GEMM": "TTG"}  # T: the Triton row kernel, G: cuBLAS GEMM
VARIANTS = ("plain", "pdl", "pdl+trigger", "pdl after Triton")
MIN_CAPABILITY = (9, 0)  # griddepcontrol: Hopper and later


@triton.jit
def _row_norm_kernel(x_ptr, y_ptr, N: tl.constexpr, WAIT: tl.constexpr, TRIGGER: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if WAIT:  # nothing is read or written before the predecessor is complete (it may still read y)
        gdc_wait()
    if TRIGGER:
        gdc_launch_dependents()
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6) * 0.999
    tl.store(y_ptr + row * N + cols, y.to(tl.float16))


def launches(pattern: str, kernels: int, variant: str) -> list[tuple[str, bool, bool]]:
    """The chain's kernels in order: (kind, launched with PDL and waiting first, triggering its dependents)."""
    kinds = [pattern[i % len(pattern)] for i in range(kernels)]
    out = []
    for i, kind in enumerate(kinds):
        after_t = i > 0 and kinds[i - 1] == "T"
        before_t = i + 1 < kernels and kinds[i + 1] == "T"
        pdl = kind == "T" and (variant in ("pdl", "pdl+trigger") or (variant == "pdl after Triton" and after_t))
        trigger = kind == "T" and (variant == "pdl+trigger" or (variant == "pdl after Triton" and before_t))
        out.append((kind, pdl, trigger))
    return out


def run_chain(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, plan: list[tuple[str, bool, bool]]) -> int:
    """Launch the plan's kernels, each reading the last one's output; 0 if the result is in x, 1 if in y."""
    src, dst = x, y
    for kind, pdl, trigger in plan:
        if kind == "T":
            _row_norm_kernel[(src.shape[0],)](src, dst, N=N_COLS, WAIT=pdl, TRIGGER=trigger, num_warps=4,
                                              launch_pdl=pdl)
        else:
            torch.mm(src, weight.t(), out=dst)
        src, dst = dst, src
    return 0 if src is x else 1


def measure(rows: int, pattern: str, *, kernels: int, rounds: int, replays: int, dot: Path | None) -> dict:
    """variant -> {"us": median us per replay, "equal": final tensor bitwise the plain chain's}."""
    g = torch.Generator(device="cuda").manual_seed(rows)
    x0 = torch.randn(rows, N_COLS, device="cuda", generator=g).half()
    weight = (torch.randn(N_COLS, N_COLS, device="cuda", generator=g) / 32).half()  # keeps the GEMM's rows ~N(0, 1)
    graphs, finals = {}, {}
    for variant in VARIANTS:
        plan = launches(pattern, kernels, variant)
        x, y = x0.clone(), torch.empty_like(x0)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # compile every kernel variant and warm up outside the capture
            run_chain(x, y, weight, plan)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        if dot is not None:
            graph.enable_debug_mode()
        with torch.cuda.graph(graph):
            which = run_chain(x, y, weight, plan)
        if dot is not None:
            dot.mkdir(parents=True, exist_ok=True)
            graph.debug_dump(str(dot / f"{rows}_{pattern}_{variant.replace(' ', '_')}.dot"))
        x.copy_(x0)
        graph.replay()
        torch.cuda.synchronize()
        finals[variant] = (x, y)[which].clone()
        graphs[variant] = graph
    for graph in graphs.values():  # warm every graph before any timing
        for _ in range(3):
            graph.replay()
    times = {variant: [] for variant in VARIANTS}
    for _ in range(rounds):  # in turn, so that clock drift falls on every variant alike
        for variant, graph in graphs.items():
            times[variant].append(replay_us(graph, replays))
    return {variant: {"us": statistics.median(times[variant]), "equal": torch.equal(finals[variant], finals["plain"])}
            for variant in VARIANTS}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS), help="M values (default: %(default)s)")
    parser.add_argument("--kernels", type=int, default=64, help="kernels in one graph (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds over the variants (default: %(default)s)")
    parser.add_argument("--replays", type=int, default=20, help="replays in one round (default: %(default)s)")
    parser.add_argument("--json", help="also write the header and results here")
    parser.add_argument("--dot", type=Path, help="write each graph's CUDA debug DOT into this folder")
    args = parser.parse_args(argv)
    for name in ("kernels", "rounds", "replays"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if min(args.rows) < 1:
        parser.error("--rows must be at least 1")
    return args


def refusal() -> str | None:
    """Why this machine cannot run the bench, or None."""
    if not torch.cuda.is_available():
        return "bench_pdl needs a CUDA GPU"
    capability = torch.cuda.get_device_capability()
    if capability < MIN_CAPABILITY:
        return f"bench_pdl needs sm_90 or later (PDL); this GPU is sm_{capability[0]}{capability[1]}"
    return None


def main(argv: list[str]) -> int:
    args = parse(argv)
    why = refusal()
    if why:
        print(why, file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    header = {"gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
              "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
              "commit": commit_id(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": "python -m tools.kernels.bench_pdl " + " ".join(argv)}
    print(json.dumps(header))
    print("| rows | chain | variant | us per replay | us per kernel | x plain | bitwise equal |")
    print("|---|---|---|---|---|---|---|")
    results, failed = [], False
    for rows in args.rows:
        for chain, pattern in CHAINS.items():
            found = measure(rows, pattern, kernels=args.kernels, rounds=args.rounds, replays=args.replays,
                            dot=args.dot)
            for variant, r in found.items():
                per_kernel, ratio = r["us"] / args.kernels, r["us"] / found["plain"]["us"]
                print(f"| {rows} | {chain} | {variant} | {r['us']:.1f} | {per_kernel:.2f} | {ratio:.3f} | "
                      f"{r['equal']} |", flush=True)
                results.append({"rows": rows, "chain": chain, "variant": variant, "kernels": args.kernels,
                                "us_per_replay": r["us"], "us_per_kernel": per_kernel, "x_plain": ratio,
                                "equal": r["equal"]})
                failed |= not r["equal"]
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "results": results}, indent=1) + "\n")
    if failed:
        print("FAILED: a PDL chain's output differs from the plain chain's", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
