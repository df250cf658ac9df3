"""The split-K candidate of tools/kernels/bench_splitk.py: K cut into slices whose fp32 partials the next
residual-add + RMSNorm sums. Without CUDA in Triton's interpreter at small odd shapes; on Hopper at the model's.

Rule (kernels/numerics.py's): both outputs miss the float64 pipeline by at most twice what torch's fp16 GEMM
followed by add_rmsnorm_ref (fp16) misses it, plus an ulp of the largest value; outputs start as NaN, so
an element never written fails. A K that leaves the last slice empty (5 K tiles in 4 slices of 2) is among the shapes.
"""
import pytest
import torch

from kernels.numerics import fp16_rounding_ratio
from kernels.rmsnorm import add_rmsnorm_ref

pytest.importorskip("triton")
ON_GPU = torch.cuda.is_available()
HOPPER = ON_GPU and torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(ON_GPU and not HOPPER, reason="TMA GEMMs: Hopper (sm_90) only")
DEVICE = "cuda" if ON_GPU else "cpu"


def randn(*shape, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g)).to(DEVICE, torch.float16)


CASES = [(37, 320, 4, "64x64x128"), (70, 320, 3, "128x64x64"), (5, 192, 1, "64x128x64")]  # M, K, split, tile
if HOPPER:
    CASES += [(256, 2048, 2, "64x64x128"), (320, 3072, 3, "64x128x64")]


@pytest.mark.parametrize(("rows", "k", "split", "tile"), CASES)
def test_split_k_add_rmsnorm_within_rounding(rows, k, split, tile):
    from tools.kernels import bench_splitk

    n = bench_splitk.N_COLS
    x, weight = randn(rows, k, seed=1), randn(n, k, scale=k ** -0.5, seed=2)
    residual, norm_weight = randn(rows, n, seed=3), 1 + randn(n, scale=0.1, seed=4)
    partial = torch.full((split, rows, n), float("nan"), device=DEVICE)
    y = torch.full((rows, n), float("nan"), dtype=torch.float16, device=DEVICE)
    residual_out = torch.full_like(y, float("nan"))
    bench_splitk.splitk_add_rmsnorm(x, weight, residual, norm_weight, partial, y, residual_out, split, tile)

    exact_y, exact_residual = add_rmsnorm_ref(x.double() @ weight.double().T, residual.double(),
                                              norm_weight.double(), bench_splitk.EPS)
    torch_y, torch_residual = add_rmsnorm_ref((x.float() @ weight.float().T).half(), residual, norm_weight,
                                              bench_splitk.EPS)
    for got, fp16_pipeline, exact in ((y, torch_y, exact_y), (residual_out, torch_residual, exact_residual)):
        assert torch.isfinite(got).all(), "elements left unwritten (still NaN)"
        assert fp16_rounding_ratio(got, exact, fp16_pipeline) <= 1.0
