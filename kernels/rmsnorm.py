"""RMSNorm, and residual-add + RMSNorm, fused into one pass over each row.

Numerics are transformers' Qwen3RMSNorm: statistics in fp32, the normalised row rounded to the
input dtype, and only then multiplied by the weight (a second rounding). The fused variant first
rounds `residual + x` to the model dtype, as the decoder layer's own addition does. Its sublayer
output x may be an FP8 linear's product before the scales (kernels.fp8.FP8Product): each element is
scaled in fp32 and rounded to the model dtype as it is read, as rowwise `_scaled_mm` writes its output.
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import rsqrt_f32, tl, triton
from kernels.fp8 import FP8Product, FP8Rows, new_fp8_rows, store_e4m3_row


@triton.jit
def _rmsnorm_kernel(
    x_ptr,  # [rows, N] input; the sublayer output when HAS_RESIDUAL (bf16 before its scales when X_SCALED)
    x_row_scales_ptr,  # [rows] fp32 row scales of x, row stride stride_x_row_scales (only read when X_SCALED)
    x_col_scales_ptr,  # [N] fp32 column scales of x (only read when X_SCALED)
    residual_ptr,  # [rows, N] residual stream in (only read when HAS_RESIDUAL)
    weight_ptr,  # [N]
    y_ptr,  # [rows, N] normalised output (not written when QUANT)
    residual_out_ptr,  # [rows, N] residual stream out = x + residual (only written when HAS_RESIDUAL)
    inv_smooth_ptr,  # [N] fp32 reciprocal smoothing factors of the consuming FP8 linear (only read when QUANT)
    codes_ptr,  # [rows, N] e4m3 codes of y * inv_smooth (only written when QUANT)
    scales_ptr,  # [rows] fp32 per-row scales of the codes (only written when QUANT)
    stride_x,  # how far to move the pointer to go one row down, per tensor
    stride_x_row_scales,
    stride_residual,
    stride_y,
    stride_residual_out,
    eps,
    N_COLS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    X_SCALED: tl.constexpr,
    QUANT: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N_COLS
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        residual = tl.load(residual_ptr + row * stride_residual + cols, mask=mask, other=0.0)
        if X_SCALED:  # the product's scales, then the model dtype: what rowwise `_scaled_mm` would have written
            row_scale = tl.load(x_row_scales_ptr + row * stride_x_row_scales)
            col_scales = tl.load(x_col_scales_ptr + cols, mask=mask, other=0.0)
            x = (x.to(tl.float32) * row_scale * col_scales).to(residual.dtype)
        x = (x.to(tl.float32) + residual.to(tl.float32)).to(x.dtype)  # the model adds in its own dtype
        tl.store(residual_out_ptr + row * stride_residual_out + cols, x, mask=mask)
    x32 = x.to(tl.float32)
    mean_square = tl.sum(x32 * x32, axis=0) * (1.0 / N_COLS)  # torch's mean multiplies by 1/N too
    x_hat = (x32 * rsqrt_f32(mean_square + eps)).to(x.dtype)  # rounded before the weight, like transformers
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    y = (x_hat.to(tl.float32) * weight.to(tl.float32)).to(x.dtype)
    if QUANT:  # the FP8 linear's activation quantizer, on the row already in registers
        store_e4m3_row(y.to(tl.float32), inv_smooth_ptr, codes_ptr + row * N_COLS, scales_ptr + row, cols, mask)
    else:
        tl.store(y_ptr + row * stride_y + cols, y, mask=mask)


def _sublayer_output(x: torch.Tensor | FP8Product) -> tuple[torch.Tensor, torch.Size, torch.dtype, tuple | None]:
    """x's [rows, N] values as the kernel reads them, its shape, its model dtype and, for an FP8 product,
    (row scales, column scales, the row scales' stride): any stride, so an expanded scalar scale too."""
    if not isinstance(x, FP8Product):
        n = x.shape[-1]
        x2 = x.view(-1, n)
        check("x", x2, x2.shape, FLOAT_DTYPES)
        return x2, x.shape, x.dtype, None
    rows, n = x.raw.shape
    check("x raw", x.raw, (rows, n), (torch.bfloat16,))
    check("x row_scales", x.row_scales[:, None], (rows, 1), (torch.float32,))  # as a column: any row stride
    check("x col_scales", x.col_scales, (n,), (torch.float32,))
    if x.shape[-1] != n or x.shape.numel() != rows * n:
        raise ValueError(f"x: product shape {tuple(x.shape)} does not hold its raw {tuple(x.raw.shape)}")
    return x.raw, x.shape, x.dtype, (x.row_scales, x.col_scales, x.row_scales.stride(0))


def _rmsnorm_fwd(x, residual, weight, eps, y, residual_out, inv_smooth=None):
    """Launch the kernel: y (or, given the consumer's `inv_smooth`, FP8Rows of y) and residual_out."""
    x2, shape, dtype, scales = _sublayer_output(x)
    rows, n = x2.shape
    if scales is not None and residual is None:
        raise ValueError("x: an FP8 product is accepted only with a residual to add it to")
    check("weight", weight, (n,), (dtype,))
    tensors = [x2, weight, *(scales[:2] if scales is not None else ())]
    if residual is not None:
        check("residual", residual.view(-1, n), (rows, n), (dtype,))
        tensors.append(residual)
    if inv_smooth is not None:
        check("inv_smooth", inv_smooth, (n,), (torch.float32,))
        tensors.append(inv_smooth)
    device = device_of(*tensors)
    if inv_smooth is None:
        y = output("normed out", y, shape, dtype, device)
        y2 = y.view(-1, n)
    else:
        y = new_fp8_rows(shape, dtype, device)
        y2 = x2  # never written
    if residual is not None:
        residual_out = output("residual out", residual_out, shape, dtype, device)
    # pointers a variant does not touch get x in their place
    residual2 = x2 if residual is None else residual.view(-1, n)
    residual_out2 = x2 if residual_out is None else residual_out.view(-1, n)
    quant = (inv_smooth, y.codes, y.scales) if inv_smooth is not None else (x2, x2, x2)
    row_scales, col_scales, stride_row_scales = scales if scales is not None else (x2, x2, 0)
    block = triton.next_power_of_2(n)
    with on_device(device):
        _rmsnorm_kernel[(rows,)](
            x2, row_scales, col_scales, residual2, weight, y2, residual_out2, *quant,
            x2.stride(0), stride_row_scales, residual2.stride(0), y2.stride(0), residual_out2.stride(0),
            eps,
            N_COLS=n, HAS_RESIDUAL=residual is not None, X_SCALED=scales is not None, QUANT=inv_smooth is not None,
            BLOCK_N=block, num_warps=num_warps(block), enable_fp_fusion=False,
        )
    return y, residual_out


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float, *,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dimension, with transformers' Qwen3RMSNorm numerics.

    Parameters
    ----------
    x : torch.Tensor
        [..., N], fp16, bf16 or fp32, with a contiguous last dimension and leading dimensions that
        flatten to rows without a copy.
    weight : torch.Tensor
        [N], same dtype as `x`.
    eps : float
        Added to the mean square.
    out : torch.Tensor, optional
        Buffer shaped like `x` to write the result into (static buffers for CUDA graphs); may be `x`.

    Returns
    -------
    torch.Tensor
        `weight * (x * rsqrt(mean(x**2) + eps)).to(x.dtype)`, statistics in fp32.
    """
    return _rmsnorm_fwd(x, None, weight, eps, out, None)[0]


def add_rmsnorm(x: torch.Tensor | FP8Product, residual: torch.Tensor, weight: torch.Tensor, eps: float, *,
                out: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual addition followed by RMSNorm, in one pass: what a decoder layer does between sublayers.

    Parameters
    ----------
    x : torch.Tensor or kernels.fp8.FP8Product
        [..., N] sublayer output, fp16, bf16 or fp32 (contiguous last dimension); or an FP8 linear's
        product before its scales, whose value `kernels.fp8.scaled_product_ref` rounds to the product's dtype.
    residual : torch.Tensor
        The residual stream, same shape and dtype as `x`.
    weight : torch.Tensor
        [N], same dtype as `x`.
    eps : float
        Added to the mean square.
    out : tuple of two torch.Tensor, optional
        `(normed, new_residual)` buffers shaped like `x`. Each may be `x` or `residual` itself:
        every row is read in full before it is written.

    Returns
    -------
    normed : torch.Tensor
        `rmsnorm(new_residual, weight, eps)`.
    new_residual : torch.Tensor
        `residual + x`, rounded to the dtype of `x`.
    """
    normed, new_residual = out if out is not None else (None, None)
    return _rmsnorm_fwd(x, residual, weight, eps, normed, new_residual)


def rmsnorm_fp8(x: torch.Tensor, weight: torch.Tensor, eps: float, inv_smooth: torch.Tensor) -> FP8Rows:
    """`rmsnorm` quantized for the W8A8 FP8 linear that consumes it, in the same pass: the e4m3
    codes and per-row scales of `rmsnorm(x, weight, eps) * inv_smooth`, bit for bit what
    `kernels.fp8.quantize_act_fp8` makes of the fp16 result. `inv_smooth` is [N] fp32."""
    return _rmsnorm_fwd(x, None, weight, eps, None, None, inv_smooth)[0]


def add_rmsnorm_fp8(x: torch.Tensor | FP8Product, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                    inv_smooth: torch.Tensor) -> tuple[FP8Rows, torch.Tensor]:
    """`add_rmsnorm` with the normed output quantized as in `rmsnorm_fp8`: (FP8Rows, new_residual)."""
    return _rmsnorm_fwd(x, residual, weight, eps, None, None, inv_smooth)


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Plain-PyTorch `rmsnorm`, operation for operation as transformers' Qwen3RMSNorm."""
    x32 = x.to(torch.promote_types(x.dtype, torch.float32))  # fp32 as transformers; fp64 (test references) stays
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def add_rmsnorm_ref(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                    eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-PyTorch `add_rmsnorm`: `residual + x` as the decoder layer adds it, then `rmsnorm_ref`."""
    residual = residual + x
    return rmsnorm_ref(residual, weight, eps), residual
