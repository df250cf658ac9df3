"""GPU kernels only, each beside a plain-PyTorch reference with the exact numerics of the code it replaces.

LM: `embed` (the input embedding: a row's codebook sum or its text token, one pass), `rmsnorm` (RMSNorm,
residual-add + RMSNorm), `qk_norm_rope` (per-head q/k norm + RoPE from the fused qkv
projection), `swiglu` (silu(gate) * up; `swiglu_scaled` from an FP8 product before its scales; `swiglu_int8`
quantized for an int8 down_proj), `cfg_score` (classifier-free guidance scoring of the unmasking loop),
`ragged_attention` (attention over packed sequences, skipping the blocks outside each row's key range). Codec:
`snake` (Snake activation with the conv bias and residual folded in). Realtime mode: `w4a4_ref` (the W4A4
numerics contract), `w4a4_triton` (int8/FP8 tensor cores, any sm_80+ GPU), `w4a4_cuda` + `csrc/` (INT4 tensor
cores, sm_80/86/87/89, compiled with NVRTC), `fp8` / `fp8_ref` (W8A8 FP8, Hopper), `int8` / `int8_ref` (W8A8
int8 on int8 tensor cores; `row_quant` holds the pieces of its and FP8's row quantizers). `numerics` holds rounding
helpers shared by the references. The references import without Triton.
"""
import torch

from kernels._triton import HAS_TRITON


def triton_available() -> bool:
    """True when the Triton kernels can run here (CUDA and Triton); otherwise use the *_ref functions."""
    return HAS_TRITON and torch.cuda.is_available()
