"""CUTLASS 3 sm90 GEMMs against cuBLAS at the LM's shapes: `python -m tools.kernels.cutlass_gemm.bench
--library PATH [--rows 256 320 896 7168] [--projections qkv gate_up o_proj down] [--configs NAME...] [--rounds 7]
[--no-swiglu] [--json F]`.

y = x @ W.T (x [M, K], W [N, K] as nn.Linear keeps it, fp16, fp32 accumulation) per projection and M (packed
rows: 256 and 320 a 3 s output, 896 the baseline bucket, 7168 eight takes), for each configuration the library
holds (`build.py`), and split-K (2-4 slices) of the stream-K ones where N = 1024 and M <= 512.

Checks first, on weight set 0: each variant's output against cuBLAS's (torch.nn.functional.linear, what HiFi
runs): the fraction of bitwise-equal elements and the largest distance in ulps; and against float64: within fp16
rounding (`kernels.numerics.fp16_rounding_ratio` <= 1). A configuration CUTLASS cannot run at a shape is listed
as n/a. Times: us per call from CUDA-graph replays of 32 calls cycling 8 weight sets (more than L2 holds); each
graph's output is checked equal to the eager call's. Interleaved: every round times cuBLAS, each candidate, then
cuBLAS again (`interleaved_order`), so a drift in the GPU's clocks shows in cuBLAS's spread instead of in a ratio.
Then (unless --no-swiglu, and if the library holds SwiGLU configurations) gate_up with silu(gate) * up in the
GEMM's epilogue (gemm_swiglu.cu, the weight interleaved at load time) against cuBLAS followed by kernels.swiglu,
the pair captured together: the same checks (bitwise against the pair's output) and timings.
Exit status 1 when a check fails (every result is still written).
"""
import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from kernels.numerics import fp16_rounding_ratio, ulp_distance
from tools.kernels.check_realtime_gpu import COPIES, replay_us
from tools.kernels.cutlass_gemm.build import CUTLASS_VERSION
from tools.kernels.cutlass_gemm.configs import BY_NAME
from tools.kernels.cutlass_gemm.library import CutlassError, CutlassGemm, interleave_gate_up

PROJECTIONS = {"qkv": (1024, 4096), "gate_up": (1024, 6144), "o_proj": (2048, 1024), "down": (3072, 1024)}  # K, N
ROWS = (256, 320, 896, 7168)
SPLITS = (2, 3, 4)
SPLIT_K_MAX_ROWS = 512
CALLS = 4 * COPIES  # per graph replay
REPLAYS = 5  # per timing


@dataclass
class Variant:
    label: str
    config: str | None = None  # None: cuBLAS
    splits: int = 1
    status: str = "ok"
    us: list[float] = field(default_factory=list)
    equal_fraction: float | None = None
    max_ulp: int | None = None
    fp16_ratio: float | None = None
    graph_equals_eager: bool | None = None


def variants_for(names: list[str], *, rows: int, n: int) -> list[Variant]:
    """cuBLAS first, then each plain configuration, then split-K runs of the stream-K ones (N = 1024, M <= 512)."""
    plain = [name for name in names if not BY_NAME[name].swiglu]
    found = [Variant("cuBLAS")] + [Variant(name, name) for name in plain]
    if n == 1024 and rows <= SPLIT_K_MAX_ROWS:
        found += [Variant(f"{name} split-K {s}", name, s) for name in plain if BY_NAME[name].stream_k for s in SPLITS]
    return found


def swiglu_variants_for(names: list[str]) -> list[Variant]:
    """cuBLAS + kernels.swiglu first, then each SwiGLU-epilogue configuration."""
    return [Variant("cuBLAS + swiglu")] + [Variant(name, name) for name in names if BY_NAME[name].swiglu]


def interleaved_order(count: int, rounds: int) -> list[int]:
    """Indexes of variants 0..count-1 (0: cuBLAS) in timing order: each round is cuBLAS, every candidate, cuBLAS."""
    return [i for _ in range(rounds) for i in [*range(count), 0]]


def _capture(call, calls: int) -> torch.cuda.CUDAGraph:
    call(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for i in range(calls):
            call(i % COPIES)
    graph.replay()
    return graph


def cublas_kernels(rows: int, projection: str) -> list[str]:
    """The names of the kernels F.linear launches at this shape (nvjet's name says its tile and cluster); asked
    after all timings, so that the profiler cannot change them."""
    from torch.profiler import ProfilerActivity, profile
    k, n = PROJECTIONS[projection]
    x, weight = torch.randn(rows, k, device="cuda").half(), torch.randn(n, k, device="cuda").half()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            F.linear(x, weight)
            torch.cuda.synchronize()
        return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    except Exception as error:  # a nicety: its failure is noted, not fatal
        return [f"? ({error})"]


def check_and_time(variants: list[Variant], make_call, out_shape: tuple[int, int], wanted: torch.Tensor,
                   ref32: torch.Tensor, ref16: torch.Tensor, rounds: int) -> None:
    """Fill in each variant's checks (against `wanted`, the baseline's eager output on weight set 0, and the fp64
    reference's ref32 / ref16) and interleaved timings; make_call(variant, out) -> call(weight_set)."""
    last = (CALLS - 1) % COPIES  # the weight set a graph's output holds after a replay
    outs, graphs = {}, {}
    for i, v in enumerate(variants):
        if v.status != "ok":
            continue
        out = torch.empty(*out_shape, dtype=torch.float16, device="cuda")
        call = make_call(v, out)
        try:
            call(last)
            eager_last = out.clone()
            call(0)
        except CutlassError as error:
            v.status = f"n/a: {error}"
            continue
        torch.cuda.synchronize()
        v.equal_fraction = (out == wanted).float().mean().item()
        v.max_ulp = ulp_distance(out, wanted).max().item()
        v.fp16_ratio = fp16_rounding_ratio(out, ref32, ref16)
        graphs[i] = _capture(call, CALLS)
        torch.cuda.synchronize()
        v.graph_equals_eager = torch.equal(out, eager_last)
        if v.fp16_ratio > 1 or not v.graph_equals_eager or (v.config is None and v.equal_fraction != 1):
            v.status = "FAILED"
        outs[i] = out
    for i in interleaved_order(len(variants), rounds):
        if i in graphs:
            variants[i].us.append(replay_us(graphs[i], REPLAYS) / CALLS)


def _summary(variants: list[Variant], **shape) -> dict:
    base = variants[0].us
    return shape | {"cublas_median_us": statistics.median(base),
                    "cublas_spread": (max(base) - min(base)) / statistics.median(base),
                    "variants": [asdict(v) | {"median_us": statistics.median(v.us) if v.us else None}
                                 for v in variants]}


def _workspace(gemm: CutlassGemm, variants: list[Variant], *, m: int, n: int, k: int) -> torch.Tensor:
    """One workspace for every variant (those CUTLASS refuses at this shape marked n/a)."""
    size = 0
    for v in variants:
        if v.config is not None:
            try:
                size = max(size, gemm.workspace_bytes(v.config, m=m, n=n, k=k, splits=v.splits))
            except CutlassError as error:
                v.status = f"n/a: {error}"
    return torch.zeros(max(size, 1), dtype=torch.uint8, device="cuda")


def _operands(rows: int, k: int, n: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    torch.manual_seed(rows * 7 + k + n)
    xs = [torch.randn(rows, k, device="cuda").half() for _ in range(COPIES)]
    ws = [(torch.randn(n, k, device="cuda") / k ** 0.5).half() for _ in range(COPIES)]
    return xs, ws


def measure(gemm: CutlassGemm, projection: str, rows: int, rounds: int) -> dict:
    """Checks and interleaved timings of every plain variant at one shape."""
    k, n = PROJECTIONS[projection]
    xs, ws = _operands(rows, k, n)
    exact = xs[0].double() @ ws[0].double().T
    variants = variants_for(gemm.names, rows=rows, n=n)
    workspace = _workspace(gemm, variants, m=rows, n=n, k=k)

    def make_call(v: Variant, out: torch.Tensor):
        if v.config is None:
            return lambda c: torch.mm(xs[c], ws[c].T, out=out)
        return lambda c: gemm.linear(v.config, xs[c], ws[c], out=out, splits=v.splits, workspace=workspace)

    check_and_time(variants, make_call, (rows, n), F.linear(xs[0], ws[0]), exact.float(), exact.half(), rounds)
    return _summary(variants, projection=projection, rows=rows, k=k, n=n)


def measure_swiglu(gemm: CutlassGemm, rows: int, rounds: int) -> dict:
    """The SwiGLU-epilogue GEMMs against cuBLAS followed by kernels.swiglu (captured together) at gate_up's shape."""
    from kernels.swiglu import swiglu, swiglu_ref  # Triton: on the GPU machine only

    k, n = PROJECTIONS["gate_up"]
    xs, ws = _operands(rows, k, n)
    interleaved = [interleave_gate_up(w) for w in ws]
    gate, up = (xs[0].double() @ ws[0].double().T).chunk(2, dim=-1)
    ref32 = (F.silu(gate) * up).float()
    ref16 = swiglu_ref(torch.cat([gate, up], dim=-1).half())
    variants = swiglu_variants_for(gemm.names)
    workspace = _workspace(gemm, variants, m=rows, n=n // 2, k=k)
    product = torch.empty(rows, n, dtype=torch.float16, device="cuda")

    def make_call(v: Variant, out: torch.Tensor):
        if v.config is None:
            return lambda c: swiglu(torch.mm(xs[c], ws[c].T, out=product), out=out)
        return lambda c: gemm.swiglu(v.config, xs[c], interleaved[c], out=out, workspace=workspace)

    wanted = swiglu(F.linear(xs[0], ws[0]))
    check_and_time(variants, make_call, (rows, n // 2), wanted, ref32, ref16, rounds)
    return _summary(variants, projection="gate_up + SwiGLU", rows=rows, k=k, n=n)


def table(shape: dict) -> list[str]:
    base = shape["cublas_median_us"]
    lines = []
    for v in shape["variants"]:
        if v["median_us"] is None:
            lines.append(f"| {shape['rows']} | {shape['projection']} | {v['label']} | {v['status']} | | | | |")
            continue
        bitwise = "" if v["equal_fraction"] == 1 else " (not bitwise)"
        lines.append(f"| {shape['rows']} | {shape['projection']} | {v['label']}{bitwise} | {v['median_us']:.2f} | "
                     f"{v['median_us'] / base:.3f} | {100 * v['equal_fraction']:.2f} | {v['max_ulp']} | "
                     f"{v['fp16_ratio']:.3f} |" + ("" if v["status"] == "ok" else f" {v['status']}"))
    lines.append(f"| {shape['rows']} | {shape['projection']} | cuBLAS spread {100 * shape['cublas_spread']:.1f} % "
                 f"over {len(shape['variants'][0]['us'])} timings | | | | | |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True, help="the .so build.py made")
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS))
    parser.add_argument("--projections", nargs="+", choices=list(PROJECTIONS), default=list(PROJECTIONS))
    parser.add_argument("--configs", nargs="+", choices=sorted(BY_NAME), help="time only these (default: all)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-swiglu", dest="swiglu", action="store_false",
                        help="skip the SwiGLU-epilogue part (gate_up with silu(gate) * up in the epilogue)")
    parser.add_argument("--json", help="write every result here")
    args = parser.parse_args(argv)
    gemm = CutlassGemm(args.library)
    if args.configs:
        missing = sorted(set(args.configs) - set(gemm.names))
        if missing:
            parser.error(f"not in {args.library}: {', '.join(missing)}")
        gemm.names = [name for name in gemm.names if name in args.configs]
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cutlass": CUTLASS_VERSION,
           "library": args.library, "configs": gemm.names, "rounds": args.rounds, "calls_per_replay": CALLS,
           "fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction}
    print(json.dumps(env))
    print("| M | projection | variant | us | x cuBLAS | % equal to cuBLAS | max ulp | fp16 ratio |")
    print("|---|---|---|---|---|---|---|---|")
    shapes = []

    def save() -> None:  # after every shape: a crash later keeps what was measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"env": env, "shapes": shapes}, f, indent=1)

    for rows in args.rows:
        for projection in args.projections:
            shapes.append(measure(gemm, projection, rows, args.rounds))
            print("\n".join(table(shapes[-1])), flush=True)
            save()
    if args.swiglu and len(swiglu_variants_for(gemm.names)) > 1:
        for rows in args.rows:
            shapes.append(measure_swiglu(gemm, rows, args.rounds))
            print("\n".join(table(shapes[-1])), flush=True)
            save()
    for shape in shapes:
        shape["cublas_kernels"] = cublas_kernels(shape["rows"], shape["projection"].split()[0])
        print(f"cuBLAS at {shape['rows']} x {shape['projection']}: {', '.join(shape['cublas_kernels'])}")
    save()
    failed = [(s["rows"], s["projection"], v["label"]) for s in shapes for v in s["variants"]
              if v["status"] == "FAILED"]
    if failed:
        print(f"FAILED checks: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
