"""The LM's four projections as Hopper Triton GEMMs (tools.kernels.fused_gemm) against cuBLAS, with and without
the elementwise kernel that follows: `python -m tools.kernels.bench_gemm_fused [--rows 896 256 7168]`.

Per M (packed rows: 896 the baseline bucket, 256 a 3 s output, 7168 eight takes) and projection:
- qkv 1024 -> 4096: cuBLAS + qk_norm_rope against linear_qk_norm_rope;
- gate_up 1024 -> 6144: cuBLAS + swiglu against linear_swiglu;
- o_proj 2048 -> 1024 and down 3072 -> 1024: cuBLAS against linear;
for each tile configuration of TILES (failed compiles noted). Every variant is first checked against an
fp32 reference of the whole op: its error at most twice the cuBLAS path's plus an ulp of the largest
output (`kernels.numerics.fp16_rounding_ratio` <= 1), and the fused ones equal to this GEMM followed by
the separate kernel (bit for bit; for qkv, but in at most 1 % of the elements: each head's RMS
is summed in another order). Times are us per call replayed from a CUDA graph with 8 weight sets in
turn (`check_realtime_gpu.graph_us`), the pair of separate kernels captured together (their gap included).
"""
import argparse
import sys

import torch

from kernels.numerics import fp16_rounding_ratio, ulp_distance
from kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_ref
from kernels.swiglu import swiglu, swiglu_ref
from tools.kernels import fused_gemm
from tools.kernels.check_realtime_gpu import COPIES, graph_us

HIDDEN, N_Q, N_KV, HEAD_DIM, INTERMEDIATE, EPS = 1024, 16, 8, 128, 3072, 1e-6
# (BM, BH, BK, warps, stages, programs per SM (0: one per tile), warp specialisation); qkv takes BH = 64
TILES = [(128, 64, 64, 8, 4, 0, False), (128, 64, 64, 4, 4, 0, False), (128, 128, 64, 8, 3, 0, False),
         (64, 64, 64, 4, 4, 0, False), (64, 128, 64, 4, 3, 0, False), (128, 64, 64, 8, 4, 1, False),
         (64, 64, 64, 4, 4, 2, False), (128, 64, 64, 8, 4, 0, True), (128, 64, 128, 8, 3, 0, False),
         (64, 32, 128, 4, 4, 0, False)]


def _rope(rows: int):
    angles = torch.rand(rows, HEAD_DIM, device="cuda") * 6.3
    return angles.cos().half(), angles.sin().half()


def _projection(name: str, m: int, seed: int):
    """separate(i, outs) and fused(i, tiles, outs) on weight set i, chained(tiles) (this GEMM, then the
    separate kernel; None for a plain GEMM), the output buffers, the fp32 reference."""
    torch.manual_seed(seed)
    k, n = {"qkv": (HIDDEN, (N_Q + 2 * N_KV) * HEAD_DIM), "gate_up": (HIDDEN, 2 * INTERMEDIATE),
            "o_proj": (N_Q * HEAD_DIM, HIDDEN), "down": (INTERMEDIATE, HIDDEN)}[name]
    x = torch.randn(m, k, device="cuda").half()
    ws = [(torch.randn(n, k, device="cuda") / k ** 0.5).half() for _ in range(COPIES)]
    mm32 = x.float() @ ws[0].float().t()
    if name == "qkv":
        qw, kw = (1 + 0.2 * torch.randn(2, HEAD_DIM, device="cuda")).half()
        cos, sin = _rope(m)
        norm = (qw, kw, cos, sin, N_Q, N_KV, EPS)

        def separate(i, out):
            return qk_norm_rope(torch.mm(x, ws[i].t(), out=out[0]), *norm)

        def fused(i, tiles, out):
            return fused_gemm.linear_qk_norm_rope(x, ws[i], *norm, tiles=tiles, out=out[1])

        def chained(tiles):
            return qk_norm_rope(fused_gemm.linear(x, ws[0], tiles=(tiles[0], 64, *tiles[2:])), *norm)

        ref32 = qk_norm_rope_ref(mm32, qw.float(), kw.float(), cos.float(), sin.float(), N_Q, N_KV, EPS)
        outs = (torch.empty(m, n, device="cuda").half(), torch.empty(m, n, device="cuda").half())
    elif name == "gate_up":
        def separate(i, out):
            return swiglu(torch.mm(x, ws[i].t(), out=out[0]), out=out[1])

        def fused(i, tiles, out):
            return fused_gemm.linear_swiglu(x, ws[i], tiles=tiles, out=out[1])

        def chained(tiles):
            return swiglu(fused_gemm.linear(x, ws[0], tiles=tiles))

        ref32 = swiglu_ref(mm32)
        outs = (torch.empty(m, n, device="cuda").half(), torch.empty(m, n // 2, device="cuda").half())
    else:
        def separate(i, out):
            return torch.mm(x, ws[i].t(), out=out[0])

        def fused(i, tiles, out):
            return fused_gemm.linear(x, ws[i], tiles=tiles, out=out[0])

        chained = None
        ref32 = mm32
        outs = (torch.empty(m, n, device="cuda").half(),)
    return separate, fused, chained, outs, ref32


def flat(result) -> torch.Tensor:
    """One [M, columns] copy of an output or of the (q, k, v) heads."""
    if isinstance(result, tuple):
        return torch.cat([t.flatten(1) for t in result], 1)
    return result.clone()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[896, 256, 7168])
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), "| us per call; ratio = error / fp16 allowance (<= 1 passes)")
    print("tiles: " + "  ".join(f"T{i}={t}" for i, t in enumerate(TILES)))
    failed = False
    for m in args.rows:
        for seed, name in enumerate(("qkv", "gate_up", "o_proj", "down")):
            separate, fused, chained, outs, ref32 = _projection(name, m, seed)
            ref32 = flat(ref32)
            ref16 = flat(separate(0, outs))
            cells = [f"cuBLAS{'+sep' if chained else ''} {graph_us(lambda i: separate(i, outs)):7.2f}"]
            notes = []
            for t, tiles in enumerate(TILES):
                try:
                    got = flat(fused(0, tiles, outs))
                    ratio = fp16_rounding_ratio(got, ref32, ref16)
                    flips = 0.0 if chained is None else (
                        ulp_distance(got, flat(chained(tiles))) > 0).float().mean().item()
                    exact = flips <= (0.01 if name == "qkv" else 0.0)  # qkv: the RMS summed in another order
                    us = graph_us(lambda i, tiles=tiles: fused(i, tiles, outs))
                except Exception as e:  # a configuration that does not compile or launch here
                    notes.append(f"T{t}: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}")
                    cells.append(f"T{t} -")
                    continue
                bad = ratio > 1 or not exact
                failed |= bad
                cells.append(f"T{t} {us:7.2f}{' FAIL' if bad else ''}")
                if bad:
                    notes.append(f"T{t}: ratio {ratio:.3g}, {flips:.2%} of the elements differ from the GEMM + "
                                 "separate kernel")
            print(f"M={m:<5} {name:<8} " + " | ".join(cells), flush=True)
            for note in notes:
                print("    " + note)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
