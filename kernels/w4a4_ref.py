"""W4A4 numerics in plain PyTorch: the source of truth every GPU kernel is checked against.

Contract (docs: shared DESIGN.md "Numerics contract for W4A4"):
- symmetric INT4 codes in [-8, 7], one fp32 scale = amax / 7 per (row, 64-wide group of K), where a row
  is a token for activations and an output channel for weights;
- codes = clamp(round_half_even(v / scale), -8, 7), with IEEE fp32 division (a zero group gets scale 0
  and codes 0);
- activations are first divided by the SVDQuant smoothing factors (fp32 IEEE division);
- each group's integer dot product is exact (|sum| <= 64 * 8 * 8), and
  y = sum_g dot_g * s_act[:, g] * s_w[:, g] in fp32, plus the low-rank branch (x_s @ L1) @ L2, the bias
  and an optional residual, rounded once to the output dtype.

Packing ("group-halves"): byte j of group g of a row holds element g*64 + j in its low nibble and
element g*64 + 32 + j in its high nibble, so a row of K codes is K/2 int8 bytes.
"""
from typing import NamedTuple

import torch

from kernels.numerics import ieee_div

GROUP = 64
QMAX = 7
QMIN = -8


class QuantizedAct(NamedTuple):
    """Activations as the W4A4 GEMMs consume them (what the fused quantize kernel returns)."""

    codes: torch.Tensor  # [M, K/2] int8 packed (group-halves) for the CUDA GEMM, or [M, K] int8 for Triton's
    scales: torch.Tensor  # [M, K/64] fp32
    lowrank: torch.Tensor  # [M, R] fp32: x_smoothed @ lora_down


def quantize_groups_ref(t: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT4 codes and scales of each (row, group) of a 2-D tensor.

    Parameters
    ----------
    t : torch.Tensor
        [R, K] floating point, K a multiple of `group`; computed in fp32.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        codes int8 in [-8, 7] of shape [R, K] and fp32 scales of shape [R, K / group].
    """
    rows, k = t.shape
    if k % group:
        raise ValueError(f"K = {k} is not a multiple of the group size {group}")
    tg = t.float().reshape(rows, k // group, group)  # [R, G, 64]
    scales = ieee_div(tg.abs().amax(dim=-1), QMAX)  # [R, G]
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))  # an all-zero group gives codes 0
    codes = torch.round(tg / safe[..., None]).clamp_(QMIN, QMAX)  # torch.round is round-half-even
    return codes.to(torch.int8).reshape(rows, k), scales


def smooth_ref(x: torch.Tensor, smooth: torch.Tensor) -> torch.Tensor:
    """x / smooth in fp32 (the SVDQuant-smoothed activation). x: [M, K], smooth: [K]."""
    return x.float() / smooth.float()


def quantize_act_ref(x: torch.Tensor, smooth: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """INT4 codes [M, K] (int8 in [-8, 7]) and fp32 scales [M, K/64] of x / smooth."""
    return quantize_groups_ref(smooth_ref(x, smooth), group)


def quantize_act_lowrank_ref(x: torch.Tensor, smooth: torch.Tensor, lora_down: torch.Tensor,
                             pack: bool = True) -> QuantizedAct:
    """What the fused quantize kernel computes, in plain PyTorch: codes (packed unless `pack` is False),
    scales and x_s @ lora_down."""
    xs = smooth_ref(x, smooth)  # [M, K] fp32
    codes, scales = quantize_groups_ref(xs)
    return QuantizedAct(pack_int4(codes) if pack else codes, scales, xs @ lora_down.float())


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """[R, K] int8 codes in [-8, 7] -> [R, K/2] int8 bytes in the group-halves layout."""
    rows, k = codes.shape
    halves = codes.reshape(rows, k // GROUP, 2, GROUP // 2)  # [R, G, (low | high), 32]
    low, high = halves[:, :, 0], halves[:, :, 1]
    return ((low & 0xF) | (high << 4)).reshape(rows, k // 2).contiguous()


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """[R, K/2] int8 bytes (group-halves) -> [R, K] int8 codes in [-8, 7]."""
    rows, kb = packed.shape
    bytes_ = packed.reshape(rows, kb // (GROUP // 2), 1, GROUP // 2)  # [R, G, 1, 32]
    low = (bytes_ << 4) >> 4  # arithmetic shifts sign-extend each nibble
    high = bytes_ >> 4
    return torch.cat([low, high], dim=2).reshape(rows, kb * 2)


def _group_dot(qa: torch.Tensor, qw: torch.Tensor, g: int) -> torch.Tensor:
    """Exact integer dot of group g: [M, 64] x [N, 64] -> [M, N] float64 (integers, |v| <= 4096)."""
    cols = slice(g * GROUP, (g + 1) * GROUP)
    return qa[:, cols].double() @ qw[:, cols].double().t()  # fp64 is exact here on any device


def group_sums_ref(qa: torch.Tensor, qw: torch.Tensor) -> torch.Tensor:
    """Integer group sums [M, N, K/64] int32 of codes qa [M, K] and qw [N, K]."""
    groups = qa.shape[1] // GROUP
    return torch.stack([_group_dot(qa, qw, g) for g in range(groups)], dim=-1).to(torch.int32)


def w4a4_matmul_ref(qa: torch.Tensor, sa: torch.Tensor, qw: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """sum_g dot_g * sa[:, g] * sw[:, g] in fp32 -> [M, N]. Codes unpacked, scales fp32 [rows, K/64]."""
    acc = torch.zeros(qa.shape[0], qw.shape[0], dtype=torch.float32, device=qa.device)
    for g in range(qa.shape[1] // GROUP):
        acc += _group_dot(qa, qw, g).float() * sa[:, g, None] * sw[None, :, g]
    return acc


def w4a4_linear_ref(x: torch.Tensor, layer, residual: torch.Tensor | None = None) -> torch.Tensor:
    """The W4A4 linear y = x W^T + b as the contract defines it, in fp32, returned in x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        [..., K] activations.
    layer
        Anything with the W4A4 buffers: `smooth` [K] fp32, `qweight` [N, K/2] int8 (group-halves),
        `wscales` [N, K/64] fp32, `lora_down` [K, R], `lora_up` [N, R] and `bias` [N] or None.
    residual : torch.Tensor, optional
        [..., N], added before the final rounding.
    """
    x2 = x.reshape(-1, x.shape[-1])  # [M, K]
    xs = smooth_ref(x2, layer.smooth)  # [M, K] fp32
    qa, sa = quantize_groups_ref(xs)
    y = w4a4_matmul_ref(qa, sa, unpack_int4(layer.qweight), layer.wscales.float())  # [M, N]
    y += (xs @ layer.lora_down.float()) @ layer.lora_up.float().t()
    if layer.bias is not None:
        y += layer.bias.float()
    if residual is not None:
        y += residual.reshape(y.shape).float()
    return y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
