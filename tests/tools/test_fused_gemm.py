"""Hopper GEMMs with fused epilogues (tools/kernels/fused_gemm.py, the candidate bench_gemm_fused measures).

Without CUDA they run in Triton's interpreter at small odd shapes (TMA descriptors included); with an
H200/H100 also at the model's shapes. Rules: the plain GEMM misses an fp32 reference by at most twice
what cuBLAS/torch's fp16 GEMM does plus an ulp of the largest output (`fp16_rounding_ratio`); a fused
epilogue equals this GEMM followed by the separate kernel (both round the GEMM's output to the model
dtype first): SwiGLU bit for bit, q/k-norm + RoPE but in at most 1 % of the elements (each head's RMS is
summed in another order). Outputs are poisoned with NaN first: an element never
written fails.
"""
import pytest
import torch

pytest.importorskip("triton")

from kernels.numerics import fp16_rounding_ratio, ulp_distance
from kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_ref
from kernels.swiglu import swiglu, swiglu_ref
from tools.kernels import fused_gemm

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
HOPPER = ON_GPU and torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(ON_GPU and not HOPPER, reason="TMA GEMMs: Hopper (sm_90) only")
hopper_only = pytest.mark.skipif(not HOPPER, reason="model-size shapes are too slow to interpret")
EPS = 1e-6
SMALL_TILES = (32, 32, 32, 4, 2, 0, False)  # interpreter-sized; the default tiles at the model's shapes


def randn(*shape, scale=1.0, seed=0, dtype=torch.float16):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g)).to(DEVICE, dtype)


def poisoned(*shape):
    return torch.full(shape, float("nan"), dtype=torch.float16, device=DEVICE)


def rope(rows, head_dim):
    angles = 6.3 * torch.rand(rows, head_dim, generator=torch.Generator().manual_seed(3))
    return angles.cos().to(DEVICE, torch.float16), angles.sin().to(DEVICE, torch.float16)


def assert_rounds_alike(got, want):
    """Equal but in at most 1 % of the elements (tests/kernels/test_kernels_fused.py's rounding rule): a
    head's RMS summed in another order than the separate kernel's flips a last bit of the normed value
    now and then, and RoPE's x cos - y sin can turn that into a few ulps of a small output (how far
    from exact each may be is fp16_rounding_ratio's check)."""
    assert torch.isfinite(got).all(), "elements left unwritten (still NaN) or not finite"
    differing = (ulp_distance(got, want) > 0).sum().item()
    assert differing <= max(1, got.numel() // 100), f"{differing} of {got.numel()} elements differ"


def flat(heads):
    return torch.cat([t.flatten(1) for t in heads], dim=1)


SMALL = [(1, 96, 128), (3, 64, 256), (17, 40, 128), (70, 96, 192)]  # M, K (K % 32 != 0 too), N
MODEL = [(896, 1024, 4096), (256, 2048, 1024), (7168, 3072, 1024), (3, 1024, 6144)]


def _check_linear(m, k, n, tiles):
    x, w = randn(m, k), randn(n, k, scale=k ** -0.5, seed=1)
    out = poisoned(m, n)
    fused_gemm.linear(x, w, out=out, tiles=tiles)
    ref32 = x.float() @ w.float().t()
    assert fp16_rounding_ratio(out, ref32, torch.mm(x, w.t())) <= 1


@pytest.mark.parametrize("m,k,n", SMALL)
def test_linear_is_as_accurate_as_torch(m, k, n):
    _check_linear(m, k, n, SMALL_TILES)


@hopper_only
@pytest.mark.parametrize("m,k,n", MODEL)
def test_linear_at_model_shapes(m, k, n):
    _check_linear(m, k, n, None)


def _check_swiglu(m, k, inter, tiles):
    x, w = randn(m, k), randn(2 * inter, k, scale=k ** -0.5, seed=1)
    out = poisoned(m, inter)
    fused_gemm.linear_swiglu(x, w, out=out, tiles=tiles)
    assert torch.equal(out, swiglu(fused_gemm.linear(x, w, tiles=tiles)))
    ref32 = swiglu_ref(x.float() @ w.float().t())
    assert fp16_rounding_ratio(out, ref32, swiglu(torch.mm(x, w.t()))) <= 1


@pytest.mark.parametrize("m,k,inter", [(1, 64, 64), (17, 96, 128), (70, 40, 192)])
def test_swiglu_epilogue_equals_the_separate_kernel(m, k, inter):
    _check_swiglu(m, k, inter, SMALL_TILES)


@hopper_only
@pytest.mark.parametrize("m", [896, 256, 7168, 5])
def test_swiglu_epilogue_at_model_shapes(m):
    _check_swiglu(m, 1024, 3072, None)


def _check_qk_norm_rope(m, k, n_q, n_kv, head_dim, positions, tiles):
    x, w = randn(m, k), randn((n_q + 2 * n_kv) * head_dim, k, scale=k ** -0.5, seed=1)
    q_w, k_w = 1 + randn(head_dim, scale=0.2, seed=4), 1 + randn(head_dim, scale=0.2, seed=5)
    cos, sin = rope(positions, head_dim)
    norm = (q_w, k_w, cos, sin, n_q, n_kv, EPS)
    tiles = tiles or fused_gemm.DEFAULT_TILES[fused_gemm.QK_NORM_ROPE]
    buffer = poisoned(m, (n_q + 2 * n_kv) * head_dim)
    got = flat(fused_gemm.linear_qk_norm_rope(x, w, *norm, out=buffer, tiles=tiles))
    one_head_tiles = (tiles[0], head_dim // 2, *tiles[2:])
    assert_rounds_alike(got, flat(qk_norm_rope(fused_gemm.linear(x, w, tiles=one_head_tiles), *norm)))
    ref32 = flat(qk_norm_rope_ref(x.float() @ w.float().t(), q_w.float(), k_w.float(), cos.float(), sin.float(),
                                  n_q, n_kv, EPS))
    assert fp16_rounding_ratio(got, ref32, flat(qk_norm_rope(torch.mm(x, w.t()), *norm))) <= 1


@pytest.mark.parametrize("m,positions", [(1, 1), (18, 6), (70, 70)])
def test_qk_norm_rope_epilogue_equals_the_separate_kernel(m, positions):
    _check_qk_norm_rope(m, 64, 2, 1, 64, positions, SMALL_TILES)


@hopper_only
@pytest.mark.parametrize("m,positions", [(896, 896), (256, 128), (7168, 896)])
def test_qk_norm_rope_epilogue_at_model_shapes(m, positions):
    _check_qk_norm_rope(m, 1024, 16, 8, 128, positions, None)


def test_shapes_the_tiles_cannot_serve_are_refused():
    x = randn(4, 64)
    with pytest.raises(ValueError, match="tile width"):
        fused_gemm.linear(x, randn(96, 64), tiles=SMALL_TILES)
    with pytest.raises(ValueError, match="two halves"):
        fused_gemm.linear_swiglu(x, randn(96, 64), tiles=SMALL_TILES)
    with pytest.raises(ValueError, match="heads"):
        fused_gemm.linear_qk_norm_rope(x, randn(64, 64), randn(16), randn(16), *rope(4, 16), 2, 1, EPS)
