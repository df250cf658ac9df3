"""SwiGLU from the fused gate_up projection: silu(gate) * up, one read of each input, one write.

Numerics are PyTorch's `F.silu(gate) * up` in the model dtype: silu computed in fp32 as
`g / (1 + exp(-g))` (CUDA's `expf` and a correctly rounded division) and rounded to the model
dtype, then the product computed in fp32 and rounded again.

`swiglu_scaled` reads an FP8 gate_up product before its scales (kernels.fp8.FP8Product: bf16 raw sums,
per-row and per-column fp32 scales), scales each element in fp32 and rounds it to the model dtype, as
rowwise `_scaled_mm` writes its output, then the same silu_mul. `swiglu_scaled_fp8` goes on to quantize
each row for the W8A8 FP8 linear after it (kernels.fp8.store_e4m3_row, as the norms do), one row per program.
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import HAS_TRITON, exp_f32, tl, triton
from kernels.fp8 import FP8Rows, new_fp8_rows, scaled_product_ref, store_e4m3_row

_MAX_BLOCK = 1024
_TRITON_DTYPES = ({torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}
                  if HAS_TRITON else {})


@triton.jit
def silu_mul(gate, up):
    """silu(gate) * up in fp32, from gate and up in the model dtype, rounded where PyTorch rounds."""
    g = gate.to(tl.float32)
    silu = tl.math.div_rn(g, 1.0 + exp_f32(-g)).to(gate.dtype)  # F.silu returns the input dtype
    return silu.to(tl.float32) * up.to(tl.float32)


@triton.jit
def _row_and_cols(n_cols, BLOCK: tl.constexpr):
    """This program's row, its BLOCK columns (tile program_id(1) of the row) and which of them exist."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    return row, cols, cols < n_cols


@triton.jit
def _scaled_gate_up(raw_ptr, row_scales_ptr, col_scales_ptr, stride_raw, n_cols, row, cols, mask, dtype: tl.constexpr):
    """gate and up at (row, cols) of an FP8 gate_up product: raw * row scale * column scale in fp32, rounded to
    the model dtype as rowwise `_scaled_mm` rounds its output (0 where not mask)."""
    row_scale = tl.load(row_scales_ptr + row)
    gate = tl.load(raw_ptr + row * stride_raw + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(raw_ptr + row * stride_raw + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    gate = (gate * row_scale * tl.load(col_scales_ptr + cols, mask=mask, other=0.0)).to(dtype)
    up = (up * row_scale * tl.load(col_scales_ptr + n_cols + cols, mask=mask, other=0.0)).to(dtype)
    return gate, up


@triton.jit
def _swiglu_kernel(
    gate_up_ptr,  # [rows, 2 * n_cols]: gate, then up
    out_ptr,  # [rows, n_cols]
    stride_gate_up,  # how far to move the pointer to go one row down
    stride_out,
    n_cols,
    BLOCK: tl.constexpr,
):
    row, cols, mask = _row_and_cols(n_cols, BLOCK)
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
    row, cols, mask = _row_and_cols(n_cols, BLOCK)
    dtype = out_ptr.dtype.element_ty
    gate, up = _scaled_gate_up(raw_ptr, row_scales_ptr, col_scales_ptr, stride_raw, n_cols, row, cols, mask, dtype)
    tl.store(out_ptr + row * stride_out + cols, silu_mul(gate, up).to(dtype), mask=mask)


@triton.jit
def _swiglu_scaled_fp8_kernel(
    raw_ptr,  # [rows, 2 * n_cols] bf16: gate, then up, before their scales
    row_scales_ptr,  # [rows] fp32
    col_scales_ptr,  # [2 * n_cols] fp32
    smooth_ptr,  # [n_cols] fp32 smoothing factors of the FP8 linear after me
    codes_ptr,  # [rows, n_cols] e4m3 codes of out / smooth
    scales_ptr,  # [rows] fp32 per-row scales of the codes
    stride_raw,
    n_cols,
    DTYPE: tl.constexpr,  # the model dtype
    BLOCK: tl.constexpr,  # >= n_cols: the whole row in one program, for its amax
):
    row, cols, mask = _row_and_cols(n_cols, BLOCK)
    gate, up = _scaled_gate_up(raw_ptr, row_scales_ptr, col_scales_ptr, stride_raw, n_cols, row, cols, mask, DTYPE)
    out = silu_mul(gate, up).to(DTYPE).to(tl.float32)  # the row swiglu_scaled writes, 0 where not mask
    store_e4m3_row(out, smooth_ptr, codes_ptr + row * n_cols, scales_ptr + row, cols, mask)


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
                      out_dtype: torch.dtype, smooth: torch.Tensor) -> FP8Rows:
    """`swiglu_scaled` quantized for the W8A8 FP8 linear that consumes it (down_proj), in the same pass: the
    e4m3 codes and per-row scales of `swiglu_scaled(...) / smooth`, bit for bit what
    `kernels.fp8.quantize_act_fp8` makes of `swiglu_scaled`'s output. `smooth` is [I] fp32. One program per
    row: the row's scale needs all of it."""
    rows, n_cols, device = _check_product(raw, row_scales, col_scales, out_dtype)
    check("smooth", smooth, (n_cols,), (torch.float32,))
    device = device_of(raw, smooth)
    out = new_fp8_rows(torch.Size((rows, n_cols)), out_dtype, device)
    block = triton.next_power_of_2(n_cols)
    with on_device(device):
        _swiglu_scaled_fp8_kernel[(rows, 1)](
            raw, row_scales, col_scales, smooth, out.codes, out.scales, raw.stride(0), n_cols,
            DTYPE=_TRITON_DTYPES[out_dtype], BLOCK=block, num_warps=num_warps(block), enable_fp_fusion=False,
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
