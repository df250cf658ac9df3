"""GPU kernels, each beside a plain-PyTorch `*_ref` with the exact numerics of the model code it replaces.

Modules: `rmsnorm` (RMSNorm, residual-add + RMSNorm), `qk_norm_rope` (per-head q/k norm + RoPE from
the fused qkv projection), `swiglu` (silu(gate) * up from the fused gate_up projection), `cfg_score`
(classifier-free guidance scoring of the unmasking loop). The references import without Triton.
"""
import torch

from kernels._triton import HAS_TRITON


def triton_available() -> bool:
    """True when the Triton kernels can run here (CUDA and Triton); otherwise use the *_ref functions."""
    return HAS_TRITON and torch.cuda.is_available()
