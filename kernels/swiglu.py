"""SwiGLU from the fused gate_up projection: silu(gate) * up, one read of each input, one write.

Numerics are PyTorch's `F.silu(gate) * up` in the model dtype: silu computed in fp32 as
`g / (1 + exp(-g))` (CUDA's `expf` and a correctly rounded division) and rounded to the model
dtype, then the product computed in fp32 and rounded again.

`swiglu_scaled` reads an FP8 gate_up product before its scales (kernels.fp8.FP8Product: bf16 raw sums,
per-row and per-column fp32 scales), scales each element in fp32 and rounds it to the model dtype, as
rowwise `_scaled_mm` writes its output, then the same silu_mul.

`swiglu_scaled_fp8` goes on to quantize each row of `swiglu_scaled`'s output for the W8A8 FP8 linear after it
(down_proj: kernels.fp8.FP8Rows, e4m3 codes of out * inv_smooth, per-row scales), bit for bit what
`kernels.fp8.quantize_act_fp8` makes of `swiglu_scaled`'s output, in the same three-slice layout as `swiglu_int8`.

`swiglu_int8` goes on to quantize each row of `swiglu`'s output for the W8A8 int8 linear after it
(kernels.int8: int8 codes of out / smooth, per-row scales), bit for bit what `kernels.int8.quantize_act_int8`
makes of `swiglu`'s output. A row's scale needs all of it, so one program holds a whole row, in three
slices kept in registers (the layout that measured fastest for the same job in e4m3, BENCHMARKS.md).
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import HAS_TRITON, exp_f32, tl, triton
from kernels.fp8 import FP8Rows, new_fp8_rows, scaled_product_ref, store_e4m3_codes, store_e4m3_scale
from kernels.int8 import Int8Rows, int8_row_scale, new_int8_rows, store_int8_codes
from kernels.row_quant import smoothed, smoothed_by_reciprocals

_MAX_BLOCK = 1024


@triton.jit
def silu_mul(gate, up):
    """silu(gate) * up in fp32, from gate and up in the model dtype, rounded where PyTorch rounds."""
    g = gate.to(tl.float32)
    silu = tl.math.div_rn(g, 1.0 + exp_f32(-g)).to(gate.dtype)  # F.silu returns the input dtype
    return silu.to(tl.float32) * up.to(tl.float32)


@triton.jit
def _swiglu_kernel(
    gate_up_ptr,  # [rows, 2 * n_cols]: gate, then up
    out_ptr,  # [rows, n_cols]
    stride_gate_up,  # how far to move the pointer to go one row down
    stride_out,
    n_cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(gate_up_ptr + row * stride_gate_up + cols, mask=mask, other=0.0)
    up = tl.load(gate_up_ptr + row * stride_gate_up + n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_out + cols, silu_mul(gate, up).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_scaled_kernel(
    raw_ptr,  # [rows, 2 * n_cols] bf16: gate, then up, before their scales
    row_scales_ptr,  # [rows] fp32
    col_scales_ptr,  # [2 * n_cols] fp32
    out_ptr,  # [rows, n_cols]
    stride_raw,
    stride_out,
    n_cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_scale = tl.load(row_scales_ptr + row)
    dtype = out_ptr.dtype.element_ty
    gate = tl.load(raw_ptr + row * stride_raw + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(raw_ptr + row * stride_raw + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    gate = (gate * row_scale * tl.load(col_scales_ptr + cols, mask=mask, other=0.0)).to(dtype)
    up = (up * row_scale * tl.load(col_scales_ptr + n_cols + cols, mask=mask, other=0.0)).to(dtype)
    tl.store(out_ptr + row * stride_out + cols, silu_mul(gate, up).to(dtype), mask=mask)


@triton.jit
def _row_in_three_slices(n_cols, SLICE: tl.constexpr):
    """The quantizing kernels' layout: this program's row (int64) and its columns in three slices of SLICE, with
    their masks (3 * SLICE >= n_cols: the whole row in one program, for its amax)."""
    c0 = tl.arange(0, SLICE)
    c1 = c0 + SLICE
    c2 = c1 + SLICE
    return tl.program_id(0).to(tl.int64), c0, c1, c2, c0 < n_cols, c1 < n_cols, c2 < n_cols


@triton.jit
def _amax_of_three(x0, x1, x2):
    """max |x| over a row held in three slices."""
    return tl.maximum(tl.maximum(tl.max(tl.abs(x0), axis=0), tl.max(tl.abs(x1), axis=0)), tl.max(tl.abs(x2), axis=0))


@triton.jit
def _smoothed_swiglu_scaled(raw_ptr, row_scales_ptr, col_scales_ptr, inv_smooth_ptr, stride_raw, n_cols, row, cols,
                            mask, DTYPE: tl.constexpr):
    """swiglu_scaled's output at (row, cols), rounded to the model dtype, * inv_smooth in fp32 (0 where not mask)."""
    row_scale = tl.load(row_scales_ptr + row)
    gate = tl.load(raw_ptr + row * stride_raw + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(raw_ptr + row * stride_raw + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    gate = (gate * row_scale * tl.load(col_scales_ptr + cols, mask=mask, other=0.0)).to(DTYPE)
    up = (up * row_scale * tl.load(col_scales_ptr + n_cols + cols, mask=mask, other=0.0)).to(DTYPE)
    out = silu_mul(gate, up).to(DTYPE).to(tl.float32)
    return smoothed_by_reciprocals(out, inv_smooth_ptr, cols, mask)


@triton.jit
def _swiglu_scaled_fp8_kernel(
    raw_ptr,  # [rows, 2 * n_cols] bf16: gate, then up, before their scales
    row_scales_ptr,  # [rows] fp32
    col_scales_ptr,  # [2 * n_cols] fp32
    inv_smooth_ptr,  # [n_cols] fp32 reciprocal smoothing factors of the FP8 linear after me
    codes_ptr,  # [rows, n_cols] e4m3 codes of out * inv_smooth
    scales_ptr,  # [rows] fp32 per-row scales of the codes
    stride_raw,
    n_cols,
    DTYPE: tl.constexpr,  # the model dtype
    SLICE: tl.constexpr,  # 3 * SLICE >= n_cols: the whole row in one program, for its amax
):
    row, c0, c1, c2, m0, m1, m2 = _row_in_three_slices(n_cols, SLICE)
    args = (raw_ptr, row_scales_ptr, col_scales_ptr, inv_smooth_ptr, stride_raw, n_cols, row)
    x0 = _smoothed_swiglu_scaled(*args, c0, m0, DTYPE)
    x1 = _smoothed_swiglu_scaled(*args, c1, m1, DTYPE)
    x2 = _smoothed_swiglu_scaled(*args, c2, m2, DTYPE)
    inv_scale = store_e4m3_scale(_amax_of_three(x0, x1, x2), scales_ptr + row)
    codes_row = codes_ptr + row * n_cols
    store_e4m3_codes(x0, inv_scale, codes_row, c0, m0)
    store_e4m3_codes(x1, inv_scale, codes_row, c1, m1)
    store_e4m3_codes(x2, inv_scale, codes_row, c2, m2)


@triton.jit
def _smoothed_swiglu(gate_up_ptr, smooth_ptr, stride_gate_up, n_cols, row, cols, mask):
    """swiglu's output at (row, cols), rounded to the model dtype, / smooth in fp32 (0 where not mask)."""
    gate = tl.load(gate_up_ptr + row * stride_gate_up + cols, mask=mask, other=0.0)
    up = tl.load(gate_up_ptr + row * stride_gate_up + n_cols + cols, mask=mask, other=0.0)
    return smoothed(silu_mul(gate, up).to(gate.dtype).to(tl.float32), smooth_ptr, cols, mask)


@triton.jit
def _swiglu_int8_kernel(
    gate_up_ptr,  # [rows, 2 * n_cols]: gate, then up
    smooth_ptr,  # [n_cols] fp32 smoothing factors of the int8 linear after me
    codes_ptr,  # [rows, n_cols] int8 codes of out / smooth
    scales_ptr,  # [rows] fp32 per-row scales of the codes
    stride_gate_up,
    n_cols,
    SLICE: tl.constexpr,  # 3 * SLICE >= n_cols: the whole row in one program, for its amax
):
    row, c0, c1, c2, m0, m1, m2 = _row_in_three_slices(n_cols, SLICE)
    x0 = _smoothed_swiglu(gate_up_ptr, smooth_ptr, stride_gate_up, n_cols, row, c0, m0)
    x1 = _smoothed_swiglu(gate_up_ptr, smooth_ptr, stride_gate_up, n_cols, row, c1, m1)
    x2 = _smoothed_swiglu(gate_up_ptr, smooth_ptr, stride_gate_up, n_cols, row, c2, m2)
    scale, divisor = int8_row_scale(_amax_of_three(x0, x1, x2))
    codes_row = codes_ptr + row * n_cols
    store_int8_codes(x0, divisor, codes_row, c0, m0)
    store_int8_codes(x1, divisor, codes_row, c1, m1)
    store_int8_codes(x2, divisor, codes_row, c2, m2)
    tl.store(scales_ptr + row + tl.arange(0, 1), scale)


SWIGLU_INT8_WARPS = 8  # the e4m3 three-slice kernel's best on an H200 (BENCHMARKS.md)
SWIGLU_FP8_WARPS = 8  # the same kernel's (BENCHMARKS.md, "Realtime's down_proj in FP8 with unit scales")
_TRITON_DTYPES = ({torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}
                  if HAS_TRITON else {})


def _slice(n_cols: int) -> int:
    """The power of two whose three slices cover a row of n_cols (1024 for the LM's 3072)."""
    return triton.next_power_of_2(triton.cdiv(n_cols, 3))


def _block(n_cols: int) -> int:
    return min(_MAX_BLOCK, triton.next_power_of_2(n_cols))


def _halves(width: int) -> int:
    if width % 2:
        raise ValueError(f"gate_up width {width} is odd: expected the gate and up halves side by side")
    return width // 2


def _check_product(raw: torch.Tensor, row_scales: torch.Tensor, col_scales: torch.Tensor,
                   out_dtype: torch.dtype) -> tuple[int, int, torch.device]:
    """rows, I and the device of an FP8 gate_up product [rows, 2 I] with its scales, after checking them."""
    rows, width = raw.shape
    n_cols = _halves(width)
    check("raw", raw, (rows, width), (torch.bfloat16,))
    check("row_scales", row_scales, (rows,), (torch.float32,))
    check("col_scales", col_scales, (width,), (torch.float32,))
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype: expected one of {[str(d) for d in FLOAT_DTYPES]}, got {out_dtype}")
    return rows, n_cols, device_of(raw, row_scales, col_scales)


def swiglu(gate_up: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up for the fused gate_up projection output.

    Parameters
    ----------
    gate_up : torch.Tensor
        [rows, 2 * I]: the gate half, then the up half; fp16, bf16 or fp32, last dimension
        contiguous (any row stride).
    out : torch.Tensor, optional
        [rows, I] buffer of the same dtype to write the result into.

    Returns
    -------
    torch.Tensor
        [rows, I], `F.silu(gate) * up` rounded as PyTorch rounds it.
    """
    rows, width = gate_up.shape
    n_cols = _halves(width)
    check("gate_up", gate_up, (rows, width), FLOAT_DTYPES)
    device = device_of(gate_up)
    out = output("out", out, (rows, n_cols), gate_up.dtype, device)
    block = _block(n_cols)
    with on_device(device):
        _swiglu_kernel[(rows, triton.cdiv(n_cols, block))](
            gate_up, out, gate_up.stride(0), out.stride(0), n_cols,
            BLOCK=block, num_warps=num_warps(block), enable_fp_fusion=False,
        )
    return out


def swiglu_scaled(raw: torch.Tensor, *, row_scales: torch.Tensor, col_scales: torch.Tensor,
                  out_dtype: torch.dtype, out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(gate) * up of an FP8 gate_up product whose scales are still to be applied.

    Parameters
    ----------
    raw : torch.Tensor
        [rows, 2 * I] bf16 unscaled product (gate half, then up half), last dimension contiguous.
    row_scales : torch.Tensor
        [rows] fp32 activation scales.
    col_scales : torch.Tensor
        [2 * I] fp32 weight scales.
    out_dtype : torch.dtype
        The model dtype: each scaled element is rounded to it, and so is the result.
    out : torch.Tensor, optional
        [rows, I] buffer of out_dtype to write the result into.

    Returns
    -------
    torch.Tensor
        [rows, I], `swiglu` of `(raw * row_scales[:, None] * col_scales[None, :]).to(out_dtype)`.
    """
    rows, n_cols, device = _check_product(raw, row_scales, col_scales, out_dtype)
    out = output("out", out, (rows, n_cols), out_dtype, device)
    block = _block(n_cols)
    with on_device(device):
        _swiglu_scaled_kernel[(rows, triton.cdiv(n_cols, block))](
            raw, row_scales, col_scales, out, raw.stride(0), out.stride(0), n_cols,
            BLOCK=block, num_warps=num_warps(block), enable_fp_fusion=False,
        )
    return out


def swiglu_scaled_fp8(raw: torch.Tensor, *, row_scales: torch.Tensor, col_scales: torch.Tensor,
                      out_dtype: torch.dtype, inv_smooth: torch.Tensor) -> FP8Rows:
    """`swiglu_scaled` quantized for the W8A8 FP8 linear that consumes it (down_proj), in the same pass.

    Parameters
    ----------
    raw, row_scales, col_scales, out_dtype
        As for `swiglu_scaled`.
    inv_smooth : torch.Tensor
        [I] fp32 reciprocals of the FP8 linear's smoothing factors.

    Returns
    -------
    FP8Rows
        e4m3 codes [rows, I] and fp32 scales [rows] of `swiglu_scaled(...) * inv_smooth`, bit for bit what
        `kernels.fp8.quantize_act_fp8` makes of `swiglu_scaled`'s output (rounded to out_dtype first).
    """
    rows, n_cols, _ = _check_product(raw, row_scales, col_scales, out_dtype)
    check("inv_smooth", inv_smooth, (n_cols,), (torch.float32,))
    device = device_of(raw, row_scales, col_scales, inv_smooth)
    out = new_fp8_rows(torch.Size((rows, n_cols)), out_dtype, device)
    with on_device(device):
        _swiglu_scaled_fp8_kernel[(rows,)](
            raw, row_scales, col_scales, inv_smooth, out.codes, out.scales, raw.stride(0), n_cols,
            DTYPE=_TRITON_DTYPES[out_dtype], SLICE=_slice(n_cols), num_warps=SWIGLU_FP8_WARPS,
            enable_fp_fusion=False,
        )
    return out


def swiglu_int8(gate_up: torch.Tensor, smooth: torch.Tensor) -> Int8Rows:
    """`swiglu` quantized for the W8A8 int8 linear that consumes it, in the same pass.

    Parameters
    ----------
    gate_up : torch.Tensor
        [rows, 2 * I]: the gate half, then the up half; fp16, bf16 or fp32, last dimension contiguous.
    smooth : torch.Tensor
        [I] fp32 smoothing factors of the int8 linear.

    Returns
    -------
    Int8Rows
        int8 codes [rows, I] and fp32 scales [rows] of `swiglu(gate_up) / smooth`, bit for bit what
        `kernels.int8.quantize_act_int8` makes of `swiglu`'s output.
    """
    rows, width = gate_up.shape
    n_cols = _halves(width)
    check("gate_up", gate_up, (rows, width), FLOAT_DTYPES)
    check("smooth", smooth, (n_cols,), (torch.float32,))
    device = device_of(gate_up, smooth)
    out = new_int8_rows(torch.Size((rows, n_cols)), gate_up.dtype, device)
    with on_device(device):
        _swiglu_int8_kernel[(rows,)](
            gate_up, smooth, out.codes, out.scales, gate_up.stride(0), n_cols,
            SLICE=_slice(n_cols), num_warps=SWIGLU_INT8_WARPS, enable_fp_fusion=False,
        )
    return out


def swiglu_ref(gate_up: torch.Tensor) -> torch.Tensor:
    """Plain-PyTorch `swiglu`, as transformers' Qwen3MLP computes it on the two halves."""
    gate, up = gate_up.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def swiglu_scaled_ref(raw: torch.Tensor, *, row_scales: torch.Tensor, col_scales: torch.Tensor,
                      out_dtype: torch.dtype) -> torch.Tensor:
    """Plain-PyTorch `swiglu_scaled` (in float64 throughout given out_dtype float64: the exact value)."""
    return swiglu_ref(scaled_product_ref(raw, row_scales=row_scales, col_scales=col_scales, out_dtype=out_dtype))
