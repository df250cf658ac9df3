"""o_proj / down_proj (N = 1024) GEMMs, cuBLAS against a plain Triton GEMM at several tiles:
`python -m tools.kernels.bench_gemm_n1024`.

At the baseline bucket (M = 896 packed rows) and a long one (M = 1664), fp16 in, fp32 accumulation,
fp16 out; us per call replayed from a CUDA graph with 8 weight sets in turn (`check_realtime_gpu.graph_us`).
Each Triton tile is checked against float64 first (error at most twice cuBLAS's + 1e-3, else noted).
The Triton kernel is the textbook one (grouped tile order, tl.dot, software pipelining), no TMA,
no warp specialisation, no split-K: the baseline a Hopper-specific kernel has to beat.
"""
import sys

import torch
import triton
import triton.language as tl

from tools.kernels.check_realtime_gpu import graph_us

COPIES = 8


@triton.jit
def gemm_kernel(a_ptr, w_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pm = first_m + (pid % (GROUP_M * num_n)) % size_m
    pn = (pid % (GROUP_M * num_n)) // size_m
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * K + rk[None, :]
    w = w_ptr + rn[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a, mask=rm[:, None] < M, other=0.0), tl.load(w))
        a += BK
        w += BK
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=rm[:, None] < M)


def triton_mm(x, w, out, cfg):
    bm, bn, bk, warps, stages = cfg
    m, k = x.shape
    n = w.shape[0]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    gemm_kernel[grid](x, w, out, m, n, k, BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return out


CONFIGS = [(64, 64, 64, 4, 4), (64, 64, 128, 4, 3), (128, 64, 64, 4, 4), (128, 64, 64, 8, 4), (64, 128, 64, 4, 4),
           (128, 32, 64, 4, 4), (64, 32, 128, 4, 4), (128, 64, 128, 8, 3), (64, 64, 64, 4, 6)]


def main() -> int:
    torch.manual_seed(0)
    print(f"{'shape':<22}{'cuBLAS':>9}" + "".join(f"{'x'.join(map(str, c[:3]))+'w'+str(c[3])+'s'+str(c[4]):>16}"
                                                 for c in CONFIGS))
    for m in (896, 1664):
        for name, k, n in (("o_proj", 2048, 1024), ("down_proj", 3072, 1024)):
            x = torch.randn(m, k, device="cuda", dtype=torch.float16)
            ws = [0.05 * torch.randn(n, k, device="cuda", dtype=torch.float16) for _ in range(COPIES)]
            out = torch.empty(m, n, device="cuda", dtype=torch.float16)
            ref = (x.double() @ ws[0].double().t())
            cublas = torch.mm(x, ws[0].t())
            err_cublas = (cublas.double() - ref).abs().max().item()
            row = [graph_us(lambda i: torch.mm(x, ws[i].t(), out=out))]
            notes = []
            for cfg in CONFIGS:
                try:
                    y = triton_mm(x, ws[0], torch.empty_like(out), cfg)
                    err = (y.double() - ref).abs().max().item()
                    if err > 2 * err_cublas + 1e-3:
                        notes.append(f"{cfg}: error {err:.3g} vs cuBLAS {err_cublas:.3g}")
                    row.append(graph_us(lambda i, c=cfg: triton_mm(x, ws[i], out, c)))
                except Exception as e:  # a config that does not compile
                    notes.append(f"{cfg}: {type(e).__name__}: {str(e)[:80]}")
                    row.append(float("nan"))
            flops = 2 * m * k * n
            print(f"{name + ' M=' + str(m):<22}" + "".join(f"{v:>9.2f}" if i == 0 else f"{v:>16.2f}"
                                                        for i, v in enumerate(row)))
            best = min(v for v in row if v == v)
            print(f"   best {best:.2f} us = {flops / best / 1e6:.0f} TFLOP/s; "
                  f"cuBLAS {flops / row[0] / 1e6:.0f} TFLOP/s")
            for note in notes:
                print("   " + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
