"""W8A8 FP8 on GPUs with FP8 tensor cores (sm_89 Ada, sm_90 Hopper and later).

A Triton kernel multiplies each activation row by the smoothing factors' reciprocals and quantizes it to
e4m3 with a per-token scale (one program per row, one pass over x, no division per element);
`torch._scaled_mm` multiplies the codes with rowwise scales. No host syncs and no shape-dependent
choices at run time, so it captures into CUDA graphs. Numerics: `kernels/fp8_ref.py`; the activation
codes and scales match it bit for bit.
"""
import functools
from typing import NamedTuple

import torch

from kernels import _launch
from kernels._triton import _INTERPRET, HAS_TRITON, tl, triton
from kernels.fp8_ref import FP8_DTYPE, FP8_MAX, SMALLEST_SCALE
from kernels.row_quant import clamped_product, row_scale_reciprocal, smoothed_by_reciprocals

_E4M3_MAX = tl.constexpr(FP8_MAX) if HAS_TRITON else None  # e4m3's largest finite value, inside kernels
_SMALLEST_SCALE = tl.constexpr(SMALLEST_SCALE) if HAS_TRITON else None
FP8_TENSOR_CORES = (8, 9)  # the first compute capability with FP8 MMA (Ada); Hopper and Blackwell have it too


class FP8Rows(NamedTuple):
    """An activation handed to a W8A8 FP8 linear already quantized by the kernel that produced it."""

    codes: torch.Tensor  # [rows, K] e4m3 codes of x * inv_smooth
    scales: torch.Tensor  # [rows] fp32 per-row scales
    shape: torch.Size  # the activation's shape [..., K]
    dtype: torch.dtype  # the activation's dtype (the linear returns this dtype)


class FP8Product(NamedTuple):
    """A W8A8 FP8 linear's product before its scales, for a consumer that applies them as it reads (the
    fused SwiGLU): unit-scale `_scaled_mm` with bf16 output runs well faster than rowwise scaling."""

    raw: torch.Tensor  # [rows, N] bf16: codes @ qweight^T, summed by the FP8 tensor cores, rounded once
    row_scales: torch.Tensor  # [rows] fp32: the activation rows' scales
    col_scales: torch.Tensor  # [N] fp32: the weight's output-channel scales
    shape: torch.Size  # the output's shape [..., N]
    dtype: torch.dtype  # the dtype the scaled product is rounded to (the activation's)


def new_fp8_rows(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> FP8Rows:
    """Empty FP8Rows for an activation of this shape and dtype."""
    k = shape[-1]
    rows = shape.numel() // k
    return FP8Rows(torch.empty(rows, k, dtype=FP8_DTYPE, device=device),
                   torch.empty(rows, dtype=torch.float32, device=device), torch.Size(shape), dtype)


@triton.jit
def _round_to_e4m3(v):
    """|v| <= FP8_MAX rounded to the e4m3 grid, ties to even, in fp32 arithmetic (the interpreter's own
    fp32 -> fp8 cast rounds wrongly near powers of two; the GPU's cvt.rn needs no help)."""
    bits = v.to(tl.int32, bitcast=True)
    exponent = tl.maximum(((bits >> 23) & 0xFF) - 127, -6)  # below 2**-6 e4m3 is subnormal, spaced 2**-9
    # Adding 1.5 * 2**(exponent + 20) leaves no bits below 2**(exponent - 3), e4m3's spacing there.
    magic = (((exponent + 147) << 23) | (1 << 22)).to(tl.float32, bitcast=True)
    rounded = (tl.abs(v) + magic) - magic
    return tl.where(bits < 0, -rounded, rounded)  # the sign bit, so -0.0 stays -0.0 as in torch


@triton.jit
def store_e4m3_row(x, inv_smooth_ptr, codes_row_ptr, scale_ptr, cols, col_ok):
    """Quantize one activation row: e4m3 codes of x * inv_smooth at codes_row_ptr[cols] and the row's
    scale (amax / FP8_MAX) at scale_ptr[0]. x is the row in fp32, already rounded as the model rounds it
    (0 where not col_ok). The quantizer below and the kernels that produce activations share it.
    Two divisions per row, none per element (`kernels/fp8_ref.py`)."""
    xs = smoothed_by_reciprocals(x, inv_smooth_ptr, cols, col_ok)
    inv_scale = store_e4m3_scale(tl.max(tl.abs(xs), axis=0), scale_ptr)
    store_e4m3_codes(xs, inv_scale, codes_row_ptr, cols, col_ok)


@triton.jit
def store_e4m3_scale(amax, scale_ptr):
    """Store a row's scale (amax / FP8_MAX) at scale_ptr[0] and return 1 / scale ([1] fp32), for
    `store_e4m3_codes`; a kernel holding its row in several slices calls it once with their joint amax."""
    scale, inv_scale = row_scale_reciprocal(amax, _E4M3_MAX, _SMALLEST_SCALE)
    tl.store(scale_ptr + tl.arange(0, 1), scale)
    return inv_scale


@triton.jit
def store_e4m3_codes(xs, inv_scale, codes_row_ptr, cols, col_ok):
    """e4m3 codes of xs (a row or a slice of it, already smoothed) at codes_row_ptr[cols]."""
    v = clamped_product(xs, inv_scale, _E4M3_MAX)
    if _INTERPRET:
        v = _round_to_e4m3(v)
    tl.store(codes_row_ptr + cols, v.to(tl.float8e4nv), mask=col_ok)


@triton.jit
def _quantize_fp8_kernel(x_ptr, inv_smooth_ptr, codes_ptr, scales_ptr, K, stride_xm, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK_K)
    k_ok = k < K
    x = tl.load(x_ptr + row * stride_xm + k, mask=k_ok, other=0.0).to(tl.float32)
    store_e4m3_row(x, inv_smooth_ptr, codes_ptr + row * K, scales_ptr + row, k, k_ok)


def quantize_act_fp8(x: torch.Tensor, inv_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes and per-token scales of x * inv_smooth, in one pass (`kernels.fp8_ref.quantize_act_fp8_ref`).

    Parameters
    ----------
    x : torch.Tensor
        [M, K] fp16/bf16/fp32 activations, last dimension contiguous.
    inv_smooth : torch.Tensor
        [K] fp32 reciprocals of the smoothing factors (x is multiplied by them).

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        codes [M, K] float8_e4m3fn and fp32 scales [M] (amax / FP8_MAX of each smoothed row).
    """
    m, k = x.shape
    device = _launch.device_of(x, inv_smooth)
    _launch.check("x", x, (m, k), _launch.FLOAT_DTYPES)
    _launch.check("inv_smooth", inv_smooth, (k,), (torch.float32,))
    codes = torch.empty(m, k, dtype=FP8_DTYPE, device=device)
    scales = torch.empty(m, dtype=torch.float32, device=device)
    block = triton.next_power_of_2(k)
    with _launch.on_device(device):
        _quantize_fp8_kernel[(m,)](x, inv_smooth, codes, scales, k, x.stride(0), BLOCK_K=block,
                                   num_warps=_launch.num_warps(block), enable_fp_fusion=False)
    return codes, scales


@functools.cache
def _scaled_mm_out_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """`dtype` where rowwise `_scaled_mm` can write it here (fp16 needs a recent PyTorch), else bf16."""
    a = torch.zeros(16, 32, device=device).to(FP8_DTYPE)
    w = torch.zeros(16, 32, device=device).to(FP8_DTYPE)
    ones = functools.partial(torch.ones, dtype=torch.float32, device=device)
    try:
        torch._scaled_mm(a, w.t(), scale_a=ones(16, 1), scale_b=ones(1, 16), out_dtype=dtype)
        return dtype
    except (RuntimeError, ValueError):
        return torch.bfloat16


def scaled_mm_rowwise(codes: torch.Tensor, scales: torch.Tensor, qweight: torch.Tensor, wscales: torch.Tensor,
                      out_dtype: torch.dtype) -> torch.Tensor:
    """(codes @ qweight^T) * scales[:, None] * wscales[None, :] -> [M, N] in out_dtype.

    codes [M, K] and qweight [N, K] are row-major e4m3, scales [M] and wscales [N] fp32; K and N must
    be multiples of 16 (cuBLAS's FP8 alignment).
    """
    direct = _scaled_mm_out_dtype(codes.device, out_dtype)
    y = torch._scaled_mm(codes, qweight.t(), scale_a=scales[:, None], scale_b=wscales[None, :], out_dtype=direct)
    return y if direct == out_dtype else y.to(out_dtype)


def fp8_rows_linear(a: FP8Rows, qweight: torch.Tensor, wscales: torch.Tensor,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = W8A8-FP8 linear of activations already quantized: [..., N] in the activation's dtype."""
    y = scaled_mm_rowwise(a.codes, a.scales, qweight, wscales, a.dtype)
    y = y if bias is None else y.add_(bias)
    return y.view(*a.shape[:-1], y.shape[-1])


@functools.cache
def unit_scale(device: torch.device) -> torch.Tensor:
    """A scalar fp32 one on `device` (made once, on the first forward: warm-up runs before any graph capture)."""
    return torch.ones((), dtype=torch.float32, device=device)


def fp8_rows_product(a: FP8Rows, qweight: torch.Tensor, wscales: torch.Tensor) -> FP8Product:
    """codes @ qweight^T with unit scales, in bf16 (e4m3 sums of 1024 products reach ~2e8, past fp16's
    range); the scales a.scales [rows] and wscales [N] are left to the consumer."""
    one = unit_scale(a.codes.device)
    raw = torch._scaled_mm(a.codes, qweight.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # [rows, N]
    return FP8Product(raw, a.scales, wscales, torch.Size((*a.shape[:-1], qweight.shape[0])), a.dtype)


def scaled_product_ref(raw: torch.Tensor, *, row_scales: torch.Tensor, col_scales: torch.Tensor,
                       out_dtype: torch.dtype) -> torch.Tensor:
    """An FP8Product's value, as its consumers apply the scales: raw [rows, N] * row_scales [rows] * col_scales
    [N] in the scales' dtype, rounded to out_dtype (what rowwise `_scaled_mm` writes; float64 scales and
    out_dtype give the exact value)."""
    return (raw.to(row_scales.dtype) * row_scales[:, None] * col_scales[None, :]).to(out_dtype)


def fp8_linear(x: torch.Tensor, inv_smooth: torch.Tensor, qweight: torch.Tensor, wscales: torch.Tensor,
               bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = W8A8-FP8(x * inv_smooth, qweight) + bias for x [M, K]; returns [M, N] in x's dtype."""
    codes, scales = quantize_act_fp8(x, inv_smooth)
    return fp8_rows_linear(FP8Rows(codes, scales, x.shape, x.dtype), qweight, wscales, bias)


@functools.cache
def accumulator_bits(device: torch.device) -> int:
    """Bits below the leading one that rowwise `_scaled_mm` keeps of a product it adds to a larger value
    within one MMA step of 32 products, measured here: row j adds 31 products 2**-j of a first one,
    and the answer is the largest j whose products all arrive (23 where it sums in fp32, as on CPUs)."""
    js = torch.arange(7, 25)  # [J]; a's e4m3 codes 2**(15 - j) stay within 2**-9 .. 2**8
    a = torch.zeros(len(js), 32, device=device)
    a[:, 0] = 16.0  # with w's 16: the big product 2**8
    a[:, 1:] = (2.0 ** (15 - js)).to(device)[:, None]  # with w's 2**-7: products 2**(8 - j)
    w = torch.full((16, 32), 2.0 ** -7, device=device)
    w[:, 0] = 16.0
    ones = functools.partial(torch.ones, dtype=torch.float32, device=device)
    y = torch._scaled_mm(a.to(FP8_DTYPE), w.to(FP8_DTYPE).t(), scale_a=ones(len(js), 1), scale_b=ones(1, 16),
                         out_dtype=torch.float32)[:, 0].double().cpu()
    kept = (y - 256.0) == 31 * 2.0 ** (8 - js.double())
    bits = 0
    for j, ok in zip(js.tolist(), kept.tolist()):
        if not ok:
            break
        bits = j
    return bits


@functools.cache
def fp8_supported(device: torch.device) -> bool:
    """True where this path runs: FP8 tensor cores (sm_89+), Triton, and a PyTorch with rowwise `_scaled_mm`."""
    if device.type != "cuda" or not HAS_TRITON or torch.cuda.get_device_capability(device) < FP8_TENSOR_CORES:
        return False
    try:
        a = torch.zeros(16, 32, device=device).to(FP8_DTYPE)
        ones = functools.partial(torch.ones, dtype=torch.float32, device=device)
        torch._scaled_mm(a, a.t(), scale_a=ones(16, 1), scale_b=ones(1, 16), out_dtype=torch.bfloat16)
        return True
    except (RuntimeError, ValueError, AttributeError):
        return False

