"""W8A8 int8 on int8 tensor cores (any sm_80+ GPU), in Triton: the per-row activation quantizer and the GEMM.

The numerics are `kernels/int8_ref.py` (what `W8A8Linear` computes on the CPU), bit for bit: codes = x / smooth
divided by its row's scale amax / 127 (IEEE divisions), rounded half to even and clamped to +-127 (an all-zero row:
scale 0, codes 0); the GEMM sums codes x weight codes in int32 (exact), turns the sum into fp32 once, multiplies it by
the row scale, then by the column scale, adds the bias in fp32 and rounds once to the output dtype. Kernels that
produce an activation (the fused SwiGLU) quantize it in their own pass (`int8_row_scale`, `store_int8_codes`) and
hand the GEMM `Int8Rows`. Launch configurations are fixed per shape (no autotuning), so any call may be captured in
a CUDA graph.
"""
import functools
from typing import NamedTuple

import torch

from kernels import _launch
from kernels._triton import HAS_TRITON, grouped_tile, round_half_even, tl, triton
from kernels.int8_ref import INT8_MAX
from kernels.row_quant import clamped_quotient, row_scale, smoothed

_QMAX = tl.constexpr(float(INT8_MAX)) if HAS_TRITON else None  # inside kernels


class Int8Rows(NamedTuple):
    """An activation quantized for a W8A8 int8 linear (by `quantize_act_int8` or the kernel that produced it)."""

    codes: torch.Tensor  # [rows, K] int8 codes of x / smooth
    scales: torch.Tensor  # [rows] fp32 per-row scales
    shape: torch.Size  # the activation's shape [..., K]
    dtype: torch.dtype  # the activation's dtype (the linear returns this dtype)


def new_int8_rows(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> Int8Rows:
    """Empty Int8Rows for an activation of this shape and dtype."""
    k = shape[-1]
    rows = shape.numel() // k
    return Int8Rows(torch.empty(rows, k, dtype=torch.int8, device=device),
                    torch.empty(rows, dtype=torch.float32, device=device), torch.Size(shape), dtype)


@triton.jit
def int8_row_scale(amax):
    """(scale, divisor), both [1] fp32, of a row whose |x / smooth| peaks at amax: amax / 127 and the divisor."""
    return row_scale(amax, _QMAX)


@triton.jit
def store_int8_codes(xs, divisor, codes_row_ptr, cols, col_ok):
    """int8 codes of xs / divisor (the row's scale, 1 for a zero row) at codes_row_ptr[cols]."""
    q = round_half_even(clamped_quotient(xs, divisor, _QMAX))  # clamping first: the same integers
    tl.store(codes_row_ptr + cols, q.to(tl.int8), mask=col_ok)


@triton.jit
def _quantize_int8_kernel(x_ptr, smooth_ptr, codes_ptr, scales_ptr, K, stride_xm, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK_K)
    k_ok = k < K
    xs = smoothed(tl.load(x_ptr + row * stride_xm + k, mask=k_ok, other=0.0).to(tl.float32), smooth_ptr, k, k_ok)
    scale, divisor = int8_row_scale(tl.max(tl.abs(xs), axis=0))
    store_int8_codes(xs, divisor, codes_ptr + row * K, k, k_ok)
    tl.store(scales_ptr + row + tl.arange(0, 1), scale)


def quantize_act_int8(x: torch.Tensor, smooth: torch.Tensor) -> Int8Rows:
    """int8 codes and per-row scales of x / smooth, in one pass (one program per row).

    Parameters
    ----------
    x : torch.Tensor
        [M, K] fp16/bf16/fp32 activations, last dimension contiguous.
    smooth : torch.Tensor
        [K] fp32 smoothing factors (x is divided by them).

    Returns
    -------
    Int8Rows
        codes [M, K] int8 and fp32 scales [M] (amax / 127 of each smoothed row), with x's shape and dtype.
    """
    m, k = x.shape
    device = _launch.device_of(x, smooth)
    _launch.check("x", x, (m, k), _launch.FLOAT_DTYPES)
    _launch.check("smooth", smooth, (k,), (torch.float32,))
    rows = new_int8_rows(x.shape, x.dtype, device)
    block = triton.next_power_of_2(k)
    with _launch.on_device(device):
        _quantize_int8_kernel[(m,)](x, smooth, rows.codes, rows.scales, k, x.stride(0), BLOCK_K=block,
                                    num_warps=_launch.num_warps(block), enable_fp_fusion=False)
    return rows


@triton.jit
def _int8_gemm_kernel(a_ptr, sa_ptr, w_ptr, sw_ptr, bias_ptr, out_ptr, M, N, K,
                      HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    # Rows and columns past the edge read row / column 0 instead (never stored): only K needs masks.
    a_rows = tl.where(row_ok, rows, 0).to(tl.int64)
    w_cols = tl.where(col_ok, cols, 0).to(tl.int64)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + a_rows[:, None] * K + ks[None, :]  # [BM, BK]
    w_ptrs = w_ptr + w_cols[None, :] * K + ks[:, None]  # [BK, BN], K-major as 8-bit MMA wants it
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            a, w = tl.load(a_ptrs), tl.load(w_ptrs)
        else:
            a = tl.load(a_ptrs, mask=(k0 + ks)[None, :] < K, other=0)
            w = tl.load(w_ptrs, mask=(k0 + ks)[:, None] < K, other=0)
        acc = tl.dot(a, w, acc, out_dtype=tl.int32)  # exact: |sum| <= 127 * 127 * K < 2**31
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    # The reference's order: int32 -> fp32 (rounded once), * row scale, * column scale, + bias, one rounding.
    y = acc.to(tl.float32) * tl.load(sa_ptr + a_rows)[:, None] * tl.load(sw_ptr + w_cols)[None, :]
    if HAS_BIAS:
        y += tl.load(bias_ptr + w_cols).to(tl.float32)[None, :]
    out_ptrs = out_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :]
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


# name -> launch options. Shared memory per stage is (BLOCK_M + BLOCK_N) * BLOCK_K bytes: every tile stays within
# the 99 KB of sm_86/89/120 (tools/kernels/aot.py reports what each compiles to). sm_90: 4 warps are one
# warpgroup, whose wgmma is 64 rows tall; the 32-row tile runs mma.sync there.
GEMM_TILES = {
    "128x128": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4},
    "64x128": {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
    "64x64": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4},
    "32x64": {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 4},
    "interpreter": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 1, "num_stages": 1},  # numpy work
}
_GPU_TILES = ("128x128", "64x128", "64x64", "32x64")  # largest first


INT8_TENSOR_CORES = (8, 0)  # the compute capability from which Triton's int8 dot runs on tensor cores here


@functools.cache
def int8_supported(device: torch.device) -> bool:
    """True where these kernels run on int8 tensor cores: a CUDA GPU of compute capability 8.0 or later, with Triton."""
    return device.type == "cuda" and HAS_TRITON and torch.cuda.get_device_capability(device) >= INT8_TENSOR_CORES


@functools.cache
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def gemm_tile(m: int, n: int, device: torch.device) -> str:
    """The largest tile that still gives every SM a program for an [m, n] output, else the smallest."""
    if device.type != "cuda":
        return "interpreter"
    for tile in _GPU_TILES:
        opts = GEMM_TILES[tile]
        if triton.cdiv(m, opts["BLOCK_M"]) * triton.cdiv(n, opts["BLOCK_N"]) >= _sm_count(device):
            return tile
    return _GPU_TILES[-1]


def int8_gemm(a: Int8Rows, qweight: torch.Tensor, wscales: torch.Tensor, bias: torch.Tensor | None = None, *,
              out: torch.Tensor | None = None, tile: str | dict | None = None) -> torch.Tensor:
    """y = (a.codes @ qweight^T) * a.scales[:, None] * wscales[None, :] + bias, int32 sums, in a's dtype.

    Parameters
    ----------
    a : Int8Rows
        codes [M, K] int8 (contiguous) and fp32 scales [M]; a.dtype is the output dtype.
    qweight : torch.Tensor
        [N, K] int8 weight codes, contiguous.
    wscales : torch.Tensor
        [N] fp32 weight scales.
    bias : torch.Tensor, optional
        [N], added in fp32 before the single rounding.
    out : torch.Tensor, optional
        [M, N] contiguous buffer of a.dtype (static buffers for CUDA graphs).
    tile : str or dict, optional
        A key of `GEMM_TILES`, or launch options of the same form, to force (benchmarks); by default
        `gemm_tile` picks one.

    Returns
    -------
    torch.Tensor
        [M, N] in a.dtype, bit for bit `W8A8Linear`'s reference of the same codes.
    """
    m, k = a.codes.shape
    n = qweight.shape[0]
    tensors = [a.codes, a.scales, qweight, wscales] + ([bias] if bias is not None else [])
    device = _launch.device_of(*tensors)
    for name, t, shape, dtypes in [("a.codes", a.codes, (m, k), (torch.int8,)),
                                   ("a.scales", a.scales, (m,), (torch.float32,)),
                                   ("qweight", qweight, (n, k), (torch.int8,)),
                                   ("wscales", wscales, (n,), (torch.float32,))]:
        _launch.check(name, t, shape, dtypes)
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    if bias is not None:
        _launch.check("bias", bias, (n,), _launch.FLOAT_DTYPES)
    out = _launch.output("out", out, (m, n), a.dtype, device)
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    cfg = tile if isinstance(tile, dict) else GEMM_TILES[tile or gemm_tile(m, n, device)]
    grid = (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]),)
    with _launch.on_device(device):
        _int8_gemm_kernel[grid](
            a.codes, a.scales, qweight, wscales, bias if bias is not None else out, out, m, n, k,
            HAS_BIAS=bias is not None, EVEN_K=k % cfg["BLOCK_K"] == 0, GROUP_M=8, enable_fp_fusion=False, **cfg)
    return out


def int8_rows_linear(a: Int8Rows, qweight: torch.Tensor, wscales: torch.Tensor,
                     bias: torch.Tensor | None = None) -> torch.Tensor:
    """The W8A8 int8 linear of an activation already quantized: [..., N] in the activation's dtype."""
    y = int8_gemm(a, qweight, wscales, bias)
    return y.view(*a.shape[:-1], y.shape[-1])
