"""Split-K for the N = 1024 projections at small M, its reduction in the next residual-add + RMSNorm (issue 22
target 3): measured against cuBLAS followed by kernels.rmsnorm.add_rmsnorm.

At a 3 s output's 256-320 packed rows, o_proj (2048 -> 1024) and down_proj (3072 -> 1024) are 2-3 row tiles by
16 column tiles of 128 x 64: 32-48 of the H200's 132 multiprocessors work, each through the whole K. Here each
output tile's K is cut into SPLIT slices, one program each (SPLIT times the programs), each slice's fp32 sum
stored as a partial [SPLIT, M, 1024]; the add_rmsnorm that follows the projection in every decoder layer reads the
partials instead of the GEMM's output, adds them in a fixed order (deterministic), rounds to fp16 (the GEMM's
output as the model sees it), and goes on as kernels.rmsnorm does. Both pipelines are replayed from one CUDA
graph per variant with 8 weight sets in turn; each variant's result is checked against float64 first (its
normed output's error at most twice the cuBLAS pipeline's plus one fp16 ulp of the largest value).

    python -m tools.kernels.bench_splitk [--rows 256 320 512 896] [--splits 1 2 3 4]
"""
import argparse

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels._triton import rsqrt_f32, tl, triton
from kernels.rmsnorm import add_rmsnorm
from tools.kernels.check_realtime_gpu import COPIES, graph_us

N_COLS = 1024
EPS = 1e-6
PROJECTIONS = {"o_proj": 2048, "down_proj": 3072}
TILES = {"128x64x64": (128, 64, 64, 4, 4), "64x64x128": (64, 64, 128, 4, 4), "64x128x64": (64, 128, 64, 4, 4)}


@triton.jit
def _splitk_kernel(a_desc, w_desc, partial_ptr, M, K, n_tiles_n,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, N: tl.constexpr):
    tile = tl.program_id(0)
    split = tl.program_id(1)
    tile_m = tile // n_tiles_n
    tile_n = tile % n_tiles_n
    k_tiles = tl.cdiv(K, BK)
    per_split = tl.cdiv(k_tiles, tl.num_programs(1))
    first = split * per_split
    last = tl.minimum(first + per_split, k_tiles)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(first, last):
        a = a_desc.load([tile_m * BM, k * BK])
        acc = tl.dot(a, w_desc.load([tile_n * BN, k * BK]).T, acc)
    rows = tile_m * BM + tl.arange(0, BM)[:, None]
    cols = tile_n * BN + tl.arange(0, BN)[None, :]
    out = partial_ptr + (split * M + rows).to(tl.int64) * N + cols
    tl.store(out, acc, mask=rows < M)


@triton.jit
def _reduce_add_rmsnorm_kernel(partial_ptr, residual_ptr, weight_ptr, y_ptr, residual_out_ptr, M, eps,
                               SPLIT: tl.constexpr, N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, N)
    acc = tl.load(partial_ptr + row * N + cols)
    for s in tl.static_range(1, SPLIT):  # a fixed order: the same sum on every run
        acc += tl.load(partial_ptr + (s * M + row) * N + cols)
    x = acc.to(tl.float16)  # the projection's output as the layer sees it
    residual = tl.load(residual_ptr + row * N + cols)
    x = (x.to(tl.float32) + residual.to(tl.float32)).to(tl.float16)
    tl.store(residual_out_ptr + row * N + cols, x)
    x32 = x.to(tl.float32)
    mean_square = tl.sum(x32 * x32, axis=0) * (1.0 / N)
    x_hat = (x32 * rsqrt_f32(mean_square + eps)).to(tl.float16)
    weight = tl.load(weight_ptr + cols)
    tl.store(y_ptr + row * N + cols, (x_hat.to(tl.float32) * weight.to(tl.float32)).to(tl.float16))


def splitk_add_rmsnorm(x, weight, residual, norm_weight, partial, y, residual_out, split: int, tile: str) -> None:
    """y, residual_out = add_rmsnorm(x @ weight.T, residual, norm_weight) through `split` K slices."""
    bm, bn, bk, warps, stages = TILES[tile]
    m, k = x.shape
    n_tiles_n = N_COLS // bn
    a_desc = TensorDescriptor.from_tensor(x, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(weight, [bn, bk])
    _splitk_kernel[(triton.cdiv(m, bm) * n_tiles_n, split)](
        a_desc, w_desc, partial, m, k, n_tiles_n, BM=bm, BN=bn, BK=bk, N=N_COLS,
        num_warps=warps, num_stages=stages)
    _reduce_add_rmsnorm_kernel[(m,)](partial, residual, norm_weight, y, residual_out, m, EPS, SPLIT=split,
                                     N=N_COLS, num_warps=4)


def compare(rows: int, k: int, splits: list[int]) -> list[tuple[str, float, float]]:
    """(variant, us per projection + norm, normed output's max error vs float64) for cuBLAS and each split/tile."""
    torch.manual_seed(rows + k)
    dev = "cuda"
    x = [torch.randn(rows, k, device=dev, dtype=torch.float16) for _ in range(COPIES)]
    weights = [torch.randn(N_COLS, k, device=dev, dtype=torch.float16) / k ** 0.5 for _ in range(COPIES)]
    residual = torch.randn(rows, N_COLS, device=dev, dtype=torch.float16)
    norm_weight = 1 + 0.1 * torch.randn(N_COLS, device=dev, dtype=torch.float16)
    h = torch.empty(rows, N_COLS, device=dev, dtype=torch.float16)
    y, residual_out = torch.empty_like(h), torch.empty_like(h)
    exact = (x[0].double() @ weights[0].double().T).half().double() + residual.double()
    exact = exact * torch.rsqrt(exact.pow(2).mean(-1, keepdim=True) + EPS) * norm_weight.double()

    def cublas(copy: int) -> None:
        torch.mm(x[copy], weights[copy].T, out=h)
        add_rmsnorm(h, residual, norm_weight, EPS, out=(y, residual_out))

    cublas(0)
    base_err = (y.double() - exact).abs().max().item()
    results = [("cuBLAS + add_rmsnorm", graph_us(cublas, calls=COPIES, replays=30), base_err)]
    allowed = 2 * base_err + exact.abs().max().item() * 2 ** -10
    for split in splits:
        partial = torch.empty(split, rows, N_COLS, device=dev, dtype=torch.float32)
        for tile in TILES:
            def fused(copy: int, split=split, tile=tile, partial=partial) -> None:
                splitk_add_rmsnorm(x[copy], weights[copy], residual, norm_weight, partial, y, residual_out,
                                   split, tile)

            fused(0)
            err = (y.double() - exact).abs().max().item()
            name = f"split {split}, tile {tile}" + ("" if err <= allowed else " (ERROR TOO LARGE)")
            results.append((name, graph_us(fused, calls=COPIES, replays=30), err))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[256, 320, 512, 896])
    parser.add_argument("--splits", type=int, nargs="+", default=[1, 2, 3, 4])
    args = parser.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}")
    print("| projection | rows | variant | us (GEMM + add_rmsnorm) | x cuBLAS | max err vs fp64 |")
    print("|---|---|---|---|---|---|")
    for name, k in PROJECTIONS.items():
        for rows in args.rows:
            results = compare(rows, k, args.splits)
            base = results[0][1]
            best = min(results[1:], key=lambda r: r[1])
            for variant, us, err in results:
                mark = " **best**" if variant == best[0] else ""
                print(f"| {name} | {rows} | {variant}{mark} | {us:.2f} | {us / base:.3f} | {err:.2e} |", flush=True)


if __name__ == "__main__":
    main()
