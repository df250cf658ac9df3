"""Adapters from the model's tensor layouts to the fused kernels in kernels/ (CUDA + Triton only).

Where the consumer is a W8A8 FP8 linear, the norms (and, for an FP8 down_proj after an FP8 gate_up, SwiGLU) get its
smoothing factors' reciprocals and return FP8Rows (e4m3 codes + per-row scales) instead of the fp16 activation: one
kernel fewer per linear. An FP8 gate_up hands SwiGLU its product before the scales (FP8Product), which SwiGLU
applies as it reads.
A W8A8 int8 down_proj (Realtime's W4A4 recipe option) gets its input quantized by SwiGLU (Int8Rows).
The residual add + RMSNorm applies the scales of an FP8 sublayer output (o_proj's, down_proj's) as it reads.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.embed import embed as _embed
from kernels.fp8 import FP8Product, FP8Rows
from kernels.int8 import Int8Rows
from kernels.qk_norm_rope import qk_norm_rope as _qk_norm_rope
from kernels.ragged_attention import ragged_attention
from kernels.rmsnorm import add_rmsnorm as _add_rmsnorm
from kernels.rmsnorm import add_rmsnorm_fp8, rmsnorm_fp8
from kernels.rmsnorm import rmsnorm as _rmsnorm
from kernels.swiglu import swiglu as _swiglu
from kernels.swiglu import swiglu_int8, swiglu_scaled, swiglu_scaled_fp8


def embed(input_ids: torch.Tensor, audio_mask: torch.Tensor, audio_table: torch.Tensor,
          text_table: torch.Tensor) -> torch.Tensor:
    """[B, C, S] ids -> [B, S, H] in one launch: the model's layout is the kernel's."""
    return _embed(input_ids, audio_mask, audio_table, text_table)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float,
            fp8_inv_smooth: torch.Tensor | None = None) -> torch.Tensor | FP8Rows:
    if fp8_inv_smooth is not None:
        return rmsnorm_fp8(x, weight, eps, fp8_inv_smooth)
    return _rmsnorm(x, weight, eps)


def add_rmsnorm(h: torch.Tensor | FP8Product, residual: torch.Tensor,
                norm) -> tuple[torch.Tensor | FP8Rows, torch.Tensor]:
    """(norm(residual + h), residual + h); the first quantized when norm.fp8_inv_smooth is set. h may be an FP8
    linear's product before its scales (FP8Product), which the kernel applies as it reads."""
    if norm.fp8_inv_smooth is not None:
        return add_rmsnorm_fp8(h, residual, norm.weight, norm.eps, norm.fp8_inv_smooth)
    return _add_rmsnorm(h, residual, norm.weight, norm.eps)


def qk_norm_rope(qkv: torch.Tensor, q_norm, k_norm, cos: torch.Tensor, sin: torch.Tensor,
                 n_q: int, n_kv: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[B, S, (n_q + 2 n_kv) D] -> q [B, n_q, S, D], k and v [B, n_kv, S, D] (views, no copies)."""
    B, S, _ = qkv.shape
    q, k, v = _qk_norm_rope(qkv.view(B * S, -1), q_norm.weight, k_norm.weight, cos, sin, n_q, n_kv, q_norm.eps)
    return tuple(t.view(B, S, t.shape[1], t.shape[2]).transpose(1, 2) for t in (q, k, v))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask) -> torch.Tensor:
    """q [B, Hq, S, D], k/v [B, Hkv, S, D] -> [B, S, Hq * D] (o_proj's input layout).

    KeyRanges (the runner's packed layout, B = 1): the ragged kernel, which skips the blocks outside
    each row's range. A mask tensor: SDPA with the GQA grouping done by the backend (no K/V copies).
    """
    B, Hq, S, D = q.shape
    if isinstance(mask, torch.Tensor):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # [B, Hq, S, D]
        return out.transpose(1, 2).reshape(B, S, Hq * D)
    out = ragged_attention(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),
                           mask.start, mask.end)  # [S, Hq, D]
    return out.view(1, S, Hq * D)


def swiglu(gate_up: torch.Tensor | FP8Product, *, int8_smooth: torch.Tensor | None = None,
           fp8_inv_smooth: torch.Tensor | None = None) -> torch.Tensor | Int8Rows | FP8Rows:
    """silu(gate) * up; given the int8 down_proj's `int8_smooth` (gate_up then a tensor), its Int8Rows; given the
    FP8 down_proj's `fp8_inv_smooth` (gate_up then an FP8Product), its FP8Rows."""
    shape = torch.Size((*gate_up.shape[:-1], gate_up.shape[-1] // 2))  # [..., I]
    if fp8_inv_smooth is not None:
        rows = swiglu_scaled_fp8(gate_up.raw, row_scales=gate_up.row_scales, col_scales=gate_up.col_scales,
                                 out_dtype=gate_up.dtype, inv_smooth=fp8_inv_smooth)
        return rows._replace(shape=shape)
    if int8_smooth is not None:
        return swiglu_int8(gate_up.reshape(-1, gate_up.shape[-1]), int8_smooth)._replace(shape=shape)
    if isinstance(gate_up, FP8Product):
        out = swiglu_scaled(gate_up.raw, row_scales=gate_up.row_scales, col_scales=gate_up.col_scales,
                            out_dtype=gate_up.dtype)
    else:
        out = _swiglu(gate_up.reshape(-1, gate_up.shape[-1]))
    return out.view(shape)
