"""What programmatic dependent launch (PDL) would save between the step's kernels (issue 22 targets 2 and 3).

A decoder layer at small M is ~10 kernels of a few microseconds each; between two of them the GPU drains the
first grid, flushes its writes, then launches and ramps up the next. With PDL (Hopper and later) a kernel
launched with `launch_pdl=True` may start while its predecessor still runs: it waits (`gdc_wait`, PTX
griddepcontrol.wait) for the predecessor's completion and memory flush before touching memory, and a
predecessor may let its dependents launch early (`gdc_launch_dependents`). This measures a chain of RMSNorm-like
row kernels (each reads what the previous wrote), alone and between cuBLAS GEMMs, replayed from CUDA graphs,
in three variants: plain launches, PDL launches that wait, PDL launches that wait and also let their own
dependents launch at once. Every variant's final tensor is compared with the plain chain's (bitwise: same
kernels, same order of work).

    python -m tools.kernels.bench_pdl [--rows 256 896] [--length 112] [--replays 50]
"""
import argparse

import torch
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from kernels._triton import tl, triton
from tools.kernels.check_realtime_gpu import replay_us

N_COLS = 1024  # the model's hidden size


@triton.jit
def _row_norm_kernel(x_ptr, y_ptr, N: tl.constexpr, WAIT: tl.constexpr, TRIGGER: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if WAIT:  # nothing is read or written before the predecessor is complete
        gdc_wait()
    if TRIGGER:
        gdc_launch_dependents()
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6) * 0.999
    tl.store(y_ptr + row * N + cols, y.to(tl.float16))


VARIANTS = {"plain": (False, False, False), "pdl wait": (True, True, False), "pdl wait+trigger": (True, True, True)}


def _norm(x: torch.Tensor, y: torch.Tensor, variant: str) -> None:
    pdl, wait, trigger = VARIANTS[variant]
    _row_norm_kernel[(x.shape[0],)](x, y, N=N_COLS, WAIT=wait, TRIGGER=trigger, num_warps=4, launch_pdl=pdl)


def _chain(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None, length: int, variant: str) -> None:
    """`length` norms, each reading the last one's output; with `weight`, a GEMM (x @ weight.T) after each."""
    for _ in range(length):
        _norm(x, y, variant)
        if weight is None:
            x, y = y, x
        else:
            torch.mm(y, weight.t(), out=x)


def measure(rows: int, length: int, with_gemm: bool, replays: int) -> dict[str, tuple[float, bool]]:
    """variant -> (median us per replay, final tensor bitwise equal to the plain chain's)."""
    torch.manual_seed(0)
    x0 = torch.randn(rows, N_COLS, device="cuda", dtype=torch.float16)
    weight = (torch.randn(N_COLS, N_COLS, device="cuda", dtype=torch.float16) / 32) if with_gemm else None
    results, reference = {}, None
    for variant in VARIANTS:
        x, y = x0.clone(), torch.empty_like(x0)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            _chain(x, y, weight, 2, variant)  # compile and warm outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _chain(x, y, weight, length, variant)
        x.copy_(x0)
        graph.replay()
        torch.cuda.synchronize()
        final = (x if with_gemm or length % 2 == 0 else y).clone()
        reference = final if reference is None else reference
        for _ in range(5):
            graph.replay()
        results[variant] = (replay_us(graph, replays), torch.equal(final, reference))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[256, 896])
    parser.add_argument("--length", type=int, default=112, help="kernels of each kind in one graph (4 per layer x 28)")
    parser.add_argument("--replays", type=int, default=50)
    args = parser.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}")
    print("| rows | chain | variant | us per replay | us per kernel pair | vs plain | equal |")
    print("|---|---|---|---|---|---|---|")
    for rows in args.rows:
        for with_gemm in (False, True):
            results = measure(rows, args.length, with_gemm, args.replays)
            plain = results["plain"][0]
            chain = "norm, GEMM 1024x1024" if with_gemm else "norm only"
            for variant, (us, equal) in results.items():
                print(f"| {rows} | {chain} | {variant} | {us:.1f} | {us / args.length:.2f} | "
                      f"{us / plain:.3f} | {equal} |")


if __name__ == "__main__":
    main()
