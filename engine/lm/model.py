"""The OmniVoice LM as plain nn.Modules: a Qwen3 body run bidirectionally over summed multi-codebook
audio embeddings, with one linear head covering all codebooks.

Build it on the meta device and load weights with `load_state_dict(assign=True)` (see
`engine.lm.checkpoint.load_lm`). Embedding, norm, RoPE, SiLU-mul and attention each sit behind one small function
so that fused kernels can replace them; the four projection linears keep the names `qkv_proj`,
`o_proj`, `gate_up_proj`, `down_proj` so that a quantizer can swap them by name.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig
from engine.lm import fused_ops as fused
from kernels.embed import embed_ref
from kernels.ragged_attention import key_range_mask
from kernels.rmsnorm import rmsnorm_ref as rms_norm
from kernels.swiglu import swiglu_ref as silu_mul


def rope_cos_sin(seq_len: int, head_dim: int, theta: float, dtype: torch.dtype,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """NeoX RoPE tables for positions 0..seq_len-1, computed in fp32 then cast: 2 x [S, head_dim]."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float, device=device) / head_dim))
    freqs = torch.arange(seq_len, device=device).float()[:, None] * inv_freq  # [S, D/2]
    angles = torch.cat((freqs, freqs), dim=-1)  # [S, D]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [B, heads, S, D] by the half-split (NeoX) convention."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


@dataclass
class KeyRanges:
    """Attention of packed sequences in a batch of one: query row s attends to keys start[s] <= j < end[s].

    The graph runner passes this instead of an [1, 1, S, S] mask: the fused attention kernel reads the
    ranges and skips the blocks outside them; the torch path turns them into the equivalent mask.
    """

    start: torch.Tensor  # [S] int32
    end: torch.Tensor  # [S] int32

    def additive_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """[1, 1, S, S]: 0 where a row may attend, -inf where it may not."""
        allowed = key_range_mask(self.start, self.end)  # [S, S]
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        return mask.masked_fill_(~allowed, float("-inf"))[None, None]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Bidirectional GQA attention under an explicit boolean mask [B, 1, S, S] (True = may attend).

    q: [B, Hq, S, D], k/v: [B, Hkv, S, D] -> [B, Hq, S, D]. K/V are expanded to the query heads so that
    every SDPA backend accepts the mask (as upstream's SDPA path does).
    """
    groups = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.fused = False
        self.fp8_inv_smooth: torch.Tensor | None = None  # fused: quantize for the FP8 linear after me

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            return fused.rmsnorm(x, self.weight, self.eps, self.fp8_inv_smooth)
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.qkv_proj = nn.Linear(cfg.hidden_size, q_dim + 2 * kv_dim, bias=False)
        self.o_proj = nn.Linear(q_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.fused = False

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, S, _ = x.shape
        q_dim, kv_dim = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        if self.fused:
            q, k, v = fused.qk_norm_rope(self.qkv_proj(x), self.q_norm, self.k_norm, cos, sin,
                                         self.num_heads, self.num_kv_heads)  # [B, H, S, D] each
            return self.o_proj(fused.attention(q, k, v, mask))  # attention out: [B, S, Hq * D]
        q, k, v = self.qkv_proj(x).split([q_dim, kv_dim, kv_dim], dim=-1)
        # per-head norm before RoPE, as Qwen3 does
        q = self.q_norm(q.view(B, S, self.num_heads, self.head_dim)).transpose(1, 2)  # [B, Hq, S, D]
        k = self.k_norm(k.view(B, S, self.num_kv_heads, self.head_dim)).transpose(1, 2)  # [B, Hkv, S, D]
        v = v.view(B, S, self.num_kv_heads, self.head_dim).transpose(1, 2)  # [B, Hkv, S, D]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = attention(q, k, v, mask)  # [B, Hq, S, D]
        return self.o_proj(out.transpose(1, 2).reshape(B, S, q_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.fused = False
        self.int8_smooth: torch.Tensor | None = None  # fused: SwiGLU quantizes for a W8A8 int8 down_proj
        self.fp8_inv_smooth: torch.Tensor | None = None  # fused: SwiGLU quantizes for a W8A8 FP8 down_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            act = fused.swiglu(self.gate_up_proj(x), int8_smooth=self.int8_smooth, fp8_inv_smooth=self.fp8_inv_smooth)
            return self.down_proj(act)
        return self.down_proj(silu_mul(self.gate_up_proj(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.attn = Attention(cfg)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)
        self.fused = False

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask,
                mlp_out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(residual stream, None), or fused: (residual stream, this block's MLP output not yet added).

        Fused, each residual addition happens inside the next norm's pass (add_rmsnorm): the
        previous block's `mlp_out` joins the stream in this block's input norm. Same roundings as
        the torch path: the sum is rounded to the model dtype before it is normalised.
        """
        if not self.fused:
            x = x + self.attn(self.input_norm(x), cos, sin, mask)
            return x + self.mlp(self.post_attn_norm(x)), None
        if mlp_out is None:
            normed = self.input_norm(x)
        else:
            normed, x = fused.add_rmsnorm(mlp_out, x, self.input_norm)
        h, x = fused.add_rmsnorm(self.attn(normed, cos, sin, mask), x, self.post_attn_norm)
        return x, self.mlp(h)


def _input_smooth(linear: nn.Module, accessor: str) -> torch.Tensor | None:
    """What `linear.<accessor>()` hands the kernel before it to quantize the linear's input with
    (`fp8_input_inv_smooth`: the smoothing factors' reciprocals, for `kernels.fp8.FP8Rows`; `int8_input_smooth`:
    the factors, for `kernels.int8.Int8Rows`), or None where the linear takes no pre-quantized input."""
    accepts = getattr(linear, accessor, None)
    return accepts() if accepts is not None else None


def _can_return_product(linear: nn.Module) -> bool:
    """Whether a linear can return its FP8 product before the scales (`kernels.fp8.FP8Product`)."""
    can = getattr(linear, "can_return_product", None)
    return can is not None and can()


class OmniVoiceLM(nn.Module):
    """Masked-diffusion LM over `num_codebooks` audio codebooks conditioned on text.

    `forward(input_ids [B, C, S], audio_mask [B, S], attn_mask [B, 1, S, S] or KeyRanges, rows=None, rope=None)`
    returns logits [B, S, C, V] (V = audio_vocab_size), or [N, C, V] for the flattened (b * S + s)
    row indices in `rows` only, which is all the unmasking loop needs. Every row sits at positions
    0..S-1 unless `rope` gives the (cos, sin) tables [S, head_dim] of other positions.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.audio_embeddings = nn.Embedding(cfg.num_codebooks * cfg.audio_vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.audio_heads = nn.Linear(cfg.hidden_size, cfg.num_codebooks * cfg.audio_vocab_size, bias=False)
        self.fused = False

    def use_fused_kernels(self) -> OmniVoiceLM:
        """Run the embedding, norms, q/k-norm + RoPE, SwiGLU and residual+norm as fused Triton kernels (CUDA only).
        Same numerics as the torch path up to summation order (kernels/ tests bound the difference)."""
        for module in self.modules():
            if hasattr(module, "fused"):
                module.fused = True
        for block in self.layers:  # FP8 linears after a norm take their input quantized by the norm kernel
            block.input_norm.fp8_inv_smooth = _input_smooth(block.attn.qkv_proj, "fp8_input_inv_smooth")
            block.post_attn_norm.fp8_inv_smooth = _input_smooth(block.mlp.gate_up_proj, "fp8_input_inv_smooth")
            # ... and gate_up leaves its scales to the fused SwiGLU (unit-scale FP8 GEMMs run faster)
            mlp = block.mlp
            mlp.gate_up_proj.product_out = _can_return_product(mlp.gate_up_proj)
            # an FP8 down_proj takes its input quantized by that SwiGLU (from the FP8Product); a W8A8 int8 one too
            # (from a tensor)
            mlp.fp8_inv_smooth = (_input_smooth(mlp.down_proj, "fp8_input_inv_smooth") if mlp.gate_up_proj.product_out
                                  else None)
            mlp.int8_smooth = (None if mlp.gate_up_proj.product_out
                               else _input_smooth(mlp.down_proj, "int8_input_smooth"))
            # FP8 o_proj and down_proj leave their scales to the residual add + RMSNorm after them (the next block's
            # input norm; after the last block, the final norm)
            block.attn.o_proj.product_out = _can_return_product(block.attn.o_proj)
            mlp.down_proj.product_out = _can_return_product(mlp.down_proj)
        return self

    def embed(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """[B, C, S] ids -> [B, S, H]: summed codebook embeddings where audio_mask, else text (row 0)."""
        tables = (self.audio_embeddings.weight, self.embed_tokens.weight)
        if self.fused:
            return fused.embed(input_ids, audio_mask, *tables)
        return embed_ref(input_ids, audio_mask, *tables)

    def forward(self, input_ids: torch.Tensor, audio_mask: torch.Tensor, attn_mask: torch.Tensor,
                rows: torch.Tensor | None = None,
                rope: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        cfg = self.cfg
        x = self.embed(input_ids, audio_mask)  # [B, S, H]
        B, S, H = x.shape
        cos, sin = rope or rope_cos_sin(S, cfg.head_dim, cfg.rope_theta, x.dtype, x.device)
        if isinstance(attn_mask, KeyRanges) and not self.layers[0].attn.fused:
            attn_mask = attn_mask.additive_mask(x.dtype)  # the torch path needs the mask itself
        mlp_out = None
        for layer in self.layers:
            x, mlp_out = layer(x, cos, sin, attn_mask, mlp_out)
        if mlp_out is None:
            x = self.norm(x)
        else:  # fused: the last block's MLP output joins the stream in the final norm's pass
            x, _ = fused.add_rmsnorm(mlp_out, x, self.norm)
        if rows is None:
            return self.audio_heads(x).view(B, S, cfg.num_codebooks, cfg.audio_vocab_size)
        x = x.reshape(B * S, H).index_select(0, rows)  # [N, H]; the norm is per row
        return self.audio_heads(x).view(-1, cfg.num_codebooks, cfg.audio_vocab_size)
