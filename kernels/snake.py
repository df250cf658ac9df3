"""Snake activation of the DAC codec, `h + sin(alpha h)^2 / alpha` per channel, in one pass.

The codec decoder runs 36 Snakes per decode, each seven PyTorch kernels. The same pass can first
add what PyTorch adds with kernels of their own just before a Snake: a convolution's bias and a
residual connection, so `h = residual + (x + bias)`; it can also write `h` out for the residual
connection that comes next.

Numerics are transformers' DacSnake1d (and PyTorch's conv bias and residual additions) in the input
dtype: each operation computed in fp32 and rounded to the dtype where PyTorch rounds, with CUDA's
`sinf`, a correctly rounded reciprocal and no fused multiply-adds, so on a GPU the kernel returns
PyTorch's bits in fp32 and in 16-bit dtypes.
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import _INTERPRET, libdevice, tl, triton

SNAKE_DTYPES = FLOAT_DTYPES  # what the kernel computes in (float64 stays on the plain-PyTorch path)
_BLOCK = 1024  # elements per program: a block of one row, or blocks of several short rows
_SHORT_BLOCK = 64
_MAX_GRID_Y = 65535  # CUDA's limit on the second grid dimension (column blocks of a row here)


@triton.jit
def _sin_f32(x):
    if _INTERPRET:  # no libdevice in the interpreter; numpy's sin is accurate too
        return tl.sin(x)
    else:
        return libdevice.sin(x)  # CUDA's sinf, which PyTorch calls, whatever tl.sin lowers to


@triton.jit
def _rounded(v, dtype: tl.constexpr):
    """fp32 v as PyTorch leaves it after one operation in `dtype` (rounded to it), back in fp32."""
    return v.to(dtype).to(tl.float32)


@triton.jit
def _snake_kernel(
    x_ptr,  # [rows = B * C, L] contiguous
    alpha_ptr,  # [C]
    bias_ptr,  # [C], read only when HAS_BIAS
    residual_ptr,  # [rows, L] contiguous, read only when HAS_RESIDUAL
    y_ptr,  # [rows, L] contiguous: snake(h)
    h_ptr,  # [rows, L] contiguous: h = residual + (x + bias), written only when STORE_INPUT
    n_rows,
    n_channels,
    length,
    HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    STORE_INPUT: tl.constexpr,
    ROWS: tl.constexpr,  # several rows per program when they are short
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # [ROWS]
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    row_mask = rows < n_rows
    mask = row_mask[:, None] & (cols < length)[None, :]
    offsets = rows.to(tl.int64)[:, None] * length + cols[None, :]  # [ROWS, BLOCK]
    channels = rows % n_channels
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    dtype = x.dtype
    h = x.to(tl.float32)
    if HAS_BIAS:  # the conv's own `output.add_(bias)`
        bias = tl.load(bias_ptr + channels, mask=row_mask, other=0.0).to(tl.float32)
        h = _rounded(h + bias[:, None], dtype)
    if HAS_RESIDUAL:  # the residual unit's `input + output`
        h = _rounded(tl.load(residual_ptr + offsets, mask=mask, other=0.0).to(tl.float32) + h, dtype)
    if STORE_INPUT:
        tl.store(h_ptr + offsets, h.to(dtype), mask=mask)
    alpha = tl.load(alpha_ptr + channels, mask=row_mask, other=1.0).to(tl.float32)  # [ROWS]
    inv_alpha = _rounded(tl.math.div_rn(tl.full((ROWS,), 1.0, tl.float32), _rounded(alpha + 1e-9, dtype)), dtype)
    s = _rounded(_sin_f32(_rounded(alpha[:, None] * h, dtype)), dtype)
    t = _rounded(inv_alpha[:, None] * _rounded(s * s, dtype), dtype)
    tl.store(y_ptr + offsets, (h + t).to(dtype), mask=mask)


def _tile(length: int) -> int:
    """Elements of a row one program takes: two tile shapes only, since every variant compiles on first use, which
    a person waiting for audio sees."""
    return _BLOCK if length > _SHORT_BLOCK * 4 else _SHORT_BLOCK


def variant(shape: tuple[int, int, int]) -> tuple:
    """What of an input's [B, C, L] shape makes Triton compile `snake` anew (besides the dtype and which of bias,
    residual and input_out are given): the tile, and for rows, channels and length whether each is 1 (a constant
    to Triton) and whether it is a multiple of 16, on which Triton specialises integer arguments."""
    batch, channels, length = shape
    return (_tile(length), *((n == 1, n % 16 == 0) for n in (batch * channels, channels, length)))


def _check_contiguous(name: str, t: torch.Tensor) -> None:
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor, got strides {t.stride()}")


def snake(x: torch.Tensor, alpha: torch.Tensor, *, bias: torch.Tensor | None = None,
          residual: torch.Tensor | None = None, out: torch.Tensor | None = None,
          input_out: torch.Tensor | None = None) -> torch.Tensor:
    """Snake of `h = residual + (x + bias)`: `h + (alpha + 1e-9).reciprocal() * sin(alpha * h) ** 2`.

    Parameters
    ----------
    x : torch.Tensor
        [B, C, L] contiguous, fp16, bf16 or fp32 (a convolution's output, before its bias when
        `bias` is given).
    alpha : torch.Tensor
        [1, C, 1] per-channel frequency, same dtype as `x`.
    bias : torch.Tensor, optional
        [C], added per channel first, as `conv(x)` adds its bias.
    residual : torch.Tensor, optional
        Shaped like `x`, added next (`residual + (x + bias)`, the residual connection).
    out : torch.Tensor, optional
        Contiguous buffer shaped like `x` for the result (static buffers for CUDA graphs); may be
        `x` or `residual`: every element is read before it is written.
    input_out : torch.Tensor, optional
        Contiguous buffer shaped like `x` to receive `h` as well (the residual stream the next
        residual connection adds back); may be `x` or `residual`.

    Returns
    -------
    torch.Tensor
        [B, C, L], rounded as PyTorch's DacSnake1d (and conv bias and residual additions) round.
    """
    if x.dim() != 3:
        raise ValueError(f"x: expected [batch, channels, length], got shape {tuple(x.shape)}")
    batch, channels, length = x.shape
    check("x", x, x.shape, SNAKE_DTYPES)
    _check_contiguous("x", x)
    check("alpha", alpha, (1, channels, 1), (x.dtype,))
    tensors = [x, alpha]
    if bias is not None:
        check("bias", bias, (channels,), (x.dtype,))
        tensors.append(bias)
    if residual is not None:
        check("residual", residual, x.shape, (x.dtype,))
        _check_contiguous("residual", residual)
        tensors.append(residual)
    device = device_of(*tensors)
    out = output("out", out, x.shape, x.dtype, device)
    _check_contiguous("out", out)
    if input_out is not None:
        output("input_out", input_out, x.shape, x.dtype, device)
        _check_contiguous("input_out", input_out)
    if x.numel() == 0:
        return out
    n_rows = batch * channels
    block = _tile(length)
    rows = _BLOCK // block
    column_blocks = triton.cdiv(length, block)
    if column_blocks > _MAX_GRID_Y:
        raise ValueError(f"x: length {length} is longer than this kernel handles ({_MAX_GRID_Y * block})")
    with on_device(device):
        _snake_kernel[(triton.cdiv(n_rows, rows), column_blocks)](
            x, alpha, x if bias is None else bias, x if residual is None else residual, out,
            x if input_out is None else input_out,  # unused pointers: never read or written
            n_rows, channels, length,
            HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None, STORE_INPUT=input_out is not None,
            ROWS=rows, BLOCK=block, num_warps=num_warps(rows * block), enable_fp_fusion=False,
        )
    return out


def snake_input_ref(x: torch.Tensor, *, bias: torch.Tensor | None = None,
                    residual: torch.Tensor | None = None) -> torch.Tensor:
    """Plain-PyTorch `h = residual + (x + bias)`, what `snake` writes to `input_out`."""
    h = x if bias is None else x + bias[:, None]
    return h if residual is None else residual + h


def snake_ref(x: torch.Tensor, alpha: torch.Tensor, *, bias: torch.Tensor | None = None,
              residual: torch.Tensor | None = None) -> torch.Tensor:
    """Plain-PyTorch `snake`, operation for operation as transformers' DacSnake1d."""
    h = snake_input_ref(x, bias=bias, residual=residual)
    return h + (alpha + 1e-9).reciprocal() * torch.sin(alpha * h).pow(2)
