"""o_proj's input quantized by the attention kernel: the q/k norm kernel's v bound and the ragged
attention's e4m3 epilogue (kernels/qk_norm_rope.py, kernels/ragged_attention.py's FP8 output).

The v bound must equal its float64 reference exactly (a max of divisions rounded once). The epilogue's
scales must equal the reference's (each row's max over its own keys: rows of different packed
sequences share a tile, and a row's range may end inside a key block), its codes must be the reference
quantizer's codes of the same kernel's fp16 output at those scales, bit for bit, and the dequantized
output must stay within the e4m3 bound of float64 attention. Outputs are poisoned with NaN first.
"""
import pytest
import torch

from kernels.fp8 import FP8Rows, new_fp8_rows
from kernels.fp8_ref import FP8_DTYPE, e4m3_codes_ref
from kernels.qk_norm_rope import qk_norm_rope, v_bound_ref
from kernels.ragged_attention import (
    ragged_attention,
    ragged_attention_fp8,
    ragged_attention_fp8_ref,
    ragged_attention_ref,
    v_bound_row_scales_ref,
)

ON_GPU = torch.cuda.is_available()  # without CUDA, tests/conftest.py has turned on Triton's interpreter
DEVICE = "cuda" if ON_GPU else "cpu"
pytest.importorskip("triton")
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs CUDA (model-size shapes are too slow to interpret)")
bf16_gpu_only = pytest.mark.skipif(not ON_GPU, reason="the interpreter truncates fp32 -> bf16, GPUs round to nearest")
SMALL = dict(block_m=16, block_n=16, num_warps=1, num_stages=1)


def randn(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=g)


def smoothing(n, seed=3):
    """Positive smoothing factors spread over two orders of magnitude, as calibration makes them."""
    return torch.exp(randn(n, seed=seed)).to(DEVICE)


def packed_ranges(bounds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    b = torch.tensor(bounds, dtype=torch.int32)
    block = torch.bucketize(torch.arange(bounds[-1], dtype=torch.int32), b[1:], right=True)
    return b[block].to(DEVICE), b[block + 1].to(DEVICE)


# ---------------------------------------------------------------- the q/k norm kernel's v bound

@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, pytest.param(torch.bfloat16, marks=bf16_gpu_only)])
@pytest.mark.parametrize("rows,n_q,n_kv,head_dim", [(1, 4, 2, 64), (17, 4, 2, 64), (6, 3, 1, 24), (5, 6, 2, 16),
                                                    pytest.param(600, 16, 8, 128, marks=gpu_only)])
def test_v_bound_equals_float64(rows, n_q, n_kv, head_dim, dtype):
    width = (n_q + 2 * n_kv) * head_dim
    qkv = randn(rows, width + 8, scale=3.0).to(DEVICE, dtype)[:, :width]
    weight = (1.0 + 0.2 * randn(head_dim, seed=4)).to(DEVICE, dtype)
    cos, sin = randn(rows, head_dim, seed=5).to(DEVICE, dtype), randn(rows, head_dim, seed=6).to(DEVICE, dtype)
    smooth = smoothing(n_q * head_dim)
    bound = torch.full((rows,), float("nan"), device=DEVICE)
    q, k, v = qk_norm_rope(qkv, weight, weight, cos, sin, n_q, n_kv, 1e-6, v_bound=(smooth, bound))
    assert torch.equal(bound, v_bound_ref(v, smooth, n_q))
    plain = qk_norm_rope(qkv, weight, weight, cos, sin, n_q, n_kv, 1e-6)
    assert torch.equal(q, plain[0]) and torch.equal(k, plain[1])


def test_v_bound_rejects_bad_arguments():
    qkv = randn(3, 8 * 16).to(DEVICE, torch.float16)
    weight, table = torch.ones(16, device=DEVICE, dtype=torch.float16), torch.ones(3, 16, device=DEVICE,
                                                                                   dtype=torch.float16)
    bound = torch.empty(3, device=DEVICE)
    with pytest.raises(ValueError, match="smooth"):
        qk_norm_rope(qkv, weight, weight, table, table, 4, 2, 1e-6, v_bound=(torch.ones(32, device=DEVICE), bound))
    with pytest.raises(ValueError, match="v_bound"):
        qk_norm_rope(qkv, weight, weight, table, table, 4, 2, 1e-6,
                     v_bound=(torch.ones(64, device=DEVICE), bound.half()))


# ---------------------------------------------------------------- the attention's e4m3 epilogue

def operands(S, hq, hkv, d, dtype, loud=None):
    """q, k, v [S, H, D] and smoothing factors; v rows in `loud` (a slice) 50x larger than the rest, so a
    row's bound depends on which keys it may see."""
    q, k, v = (2 * randn(S, h, d, seed=i) for i, h in enumerate((hq, hkv, hkv)))
    if loud is not None:
        v[loud] *= 50.0
    return (*(t.to(DEVICE, dtype) for t in (q, k, v)), smoothing(hq * d))


def check_epilogue(bounds, hq, hkv, d, dtype, ranges=None, loud=None, **settings):
    S = bounds[-1]
    q, k, v, smooth = operands(S, hq, hkv, d, dtype, loud)
    start, end = ranges or packed_ranges(bounds)
    v_bound = v_bound_ref(v, smooth, hq).to(DEVICE)
    poisoned = FP8Rows(torch.full((S, hq * d), float("nan"), device=DEVICE).to(FP8_DTYPE),
                       torch.full((S,), float("nan"), device=DEVICE), torch.Size((S, hq * d)), dtype)
    rows = ragged_attention_fp8(q, k, v, start, end, v_bound=v_bound, smooth=smooth, out=poisoned, **settings)
    scales = v_bound_row_scales_ref(start, end, v_bound)
    assert torch.equal(rows.scales, scales)
    out = ragged_attention(q, k, v, start, end, **settings).flatten(1)  # [S, Hq D] the same kernel in dtype
    want = e4m3_codes_ref(out.float() / smooth, scales)
    assert torch.equal(rows.codes.view(torch.uint8), want.view(torch.uint8)), "codes differ from the reference's"
    assert_within_e4m3_of_exact(rows.codes, rows.scales, smooth, q, k, v, start, end)
    return rows


def assert_within_e4m3_of_exact(codes, scales, smooth, q, k, v, start, end):
    """Dequantized codes against float64 attention: the fp16 attention's error (test_ragged_attention's
    rule) plus e4m3's rounding of it, 2^-4 relative (3 mantissa bits) or 2^-10 codes (subnormals)."""
    exact = ragged_attention_ref(q.double(), k.double(), v.double(), start, end).flatten(1)  # [S, Hq D]
    torch_err = (ragged_attention_ref(q, k, v, start, end).flatten(1).double() - exact).abs().max().item()
    attention_allowed = 2 * torch_err + torch.finfo(q.dtype).eps * exact.abs().max().item()
    unit = scales.double()[:, None] * smooth.double()  # [S, Hq D]: one code's worth of output
    allowed = attention_allowed + 2.0 ** -4 * (exact.abs() + attention_allowed) + 2.0 ** -10 * unit
    err = (codes.double() * unit - exact).abs()
    assert (err <= allowed).all(), f"worst {(err / allowed).max():.3g} of the allowance"


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, pytest.param(torch.bfloat16, marks=bf16_gpu_only)])
@pytest.mark.parametrize("mask_all", [True, False])
@pytest.mark.parametrize("group_heads", [False, True])
@pytest.mark.parametrize("bounds,loud", [
    ([0, 23, 36, 45], slice(23, 36)),  # three sequences in tiles of 16; the middle one's v loud
    ([0, 40, 41, 43], slice(41, 43)),  # ranges ending inside a key block; the loud keys right after them
    ([0, 16, 48, 80, 85], slice(16, 48)),  # bounds on tile edges
])
def test_fp8_epilogue(bounds, loud, group_heads, mask_all, dtype):
    check_epilogue(bounds, 4, 2, 16, dtype, loud=loud, group_heads=group_heads, mask_all=mask_all, **SMALL)


def test_fp8_epilogue_overlapping_ranges():
    """Ranges of any shape: each row's bound covers exactly its own window."""
    S = 70
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, S - 1, (S,), generator=g, dtype=torch.int32)
    end = torch.minimum(start + torch.randint(1, 40, (S,), generator=g, dtype=torch.int32), torch.tensor(S))
    check_epilogue([0, S], 4, 2, 16, torch.float16, ranges=(start.to(DEVICE), end.int().to(DEVICE)),
                   loud=slice(30, 33), **SMALL)


def test_fp8_epilogue_writes_into_rows_and_matches_its_reference():
    """Codes into given FP8Rows (o_proj's [1, S, Hq D] activation); `ragged_attention_fp8_ref` takes the
    same scales and is as close to float64 attention."""
    S, hq, hkv, d = 45, 4, 2, 16
    q, k, v, smooth = operands(S, hq, hkv, d, torch.float16, loud=slice(23, 36))
    start, end = packed_ranges([0, 23, 36, 45])
    v_bound = v_bound_ref(v, smooth, hq).to(DEVICE)
    given = new_fp8_rows(torch.Size((1, S, hq * d)), torch.float16, torch.device(DEVICE))
    rows = ragged_attention_fp8(q, k, v, start, end, v_bound=v_bound, smooth=smooth, out=given, **SMALL)
    assert rows is given and rows.codes.dtype == FP8_DTYPE
    codes, scales = ragged_attention_fp8_ref(q, k, v, start, end, v_bound, smooth)
    assert torch.equal(rows.scales, scales)
    assert_within_e4m3_of_exact(codes, scales, smooth, q, k, v, start, end)


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fp8_epilogue_model_shapes(dtype):
    check_epilogue([0, 560, 850, 896], 16, 8, 128, dtype, loud=slice(600, 610))
