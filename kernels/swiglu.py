"""SwiGLU from the fused gate_up projection: silu(gate) * up, one read of each input, one write.

Numerics are PyTorch's `F.silu(gate) * up` in the model dtype: silu computed in fp32 as
`g / (1 + exp(-g))` (CUDA's `expf` and a correctly rounded division) and rounded to the model
dtype, then the product computed in fp32 and rounded again.
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import exp_f32, tl, triton

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
    if width % 2:
        raise ValueError(f"gate_up width {width} is odd: expected the gate and up halves side by side")
    n_cols = width // 2
    check("gate_up", gate_up, (rows, width), FLOAT_DTYPES)
    device = device_of(gate_up)
    out = output("out", out, (rows, n_cols), gate_up.dtype, device)
    block = min(_MAX_BLOCK, triton.next_power_of_2(n_cols))
    with on_device(device):
        _swiglu_kernel[(rows, triton.cdiv(n_cols, block))](
            gate_up, out, gate_up.stride(0), out.stride(0), n_cols,
            BLOCK=block, num_warps=num_warps(block), enable_fp_fusion=False,
        )
    return out


def swiglu_ref(gate_up: torch.Tensor) -> torch.Tensor:
    """Plain-PyTorch `swiglu`, as transformers' Qwen3MLP computes it on the two halves."""
    gate, up = gate_up.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up
