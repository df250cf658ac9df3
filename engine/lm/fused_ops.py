"""Adapters from the model's tensor layouts to the fused kernels in kernels/ (CUDA + Triton only)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.qk_norm_rope import qk_norm_rope as _qk_norm_rope
from kernels.rmsnorm import add_rmsnorm as _add_rmsnorm
from kernels.rmsnorm import rmsnorm as _rmsnorm
from kernels.swiglu import swiglu as _swiglu


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return _rmsnorm(x, weight, eps)


def add_rmsnorm(h: torch.Tensor, residual: torch.Tensor, norm) -> tuple[torch.Tensor, torch.Tensor]:
    """(norm(residual + h), residual + h)."""
    return _add_rmsnorm(h, residual, norm.weight, norm.eps)


def qk_norm_rope(qkv: torch.Tensor, q_norm, k_norm, cos: torch.Tensor, sin: torch.Tensor,
                 n_q: int, n_kv: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[B, S, (n_q + 2 n_kv) D] -> q [B, n_q, S, D], k and v [B, n_kv, S, D] (views, no copies)."""
    B, S, _ = qkv.shape
    q, k, v = _qk_norm_rope(qkv.view(B * S, -1), q_norm.weight, k_norm.weight, cos, sin, n_q, n_kv, q_norm.eps)
    return tuple(t.view(B, S, t.shape[1], t.shape[2]).transpose(1, 2) for t in (q, k, v))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SDPA with the GQA grouping done by the backend (no expanded K/V copies)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    shape = gate_up.shape
    return _swiglu(gate_up.reshape(-1, shape[-1])).view(*shape[:-1], shape[-1] // 2)
