"""Split the fused qkv projection into heads, RMSNorm q and k per head, rotate them: one launch.

Replaces Qwen3 attention's view / q_norm / k_norm / transpose / rotate-half / cat / mul / add chain
(about 15 kernels). Numerics are transformers': the per-head RMSNorm of `kernels.rmsnorm`, then
`q * cos + rotate_half(q) * sin` with each product and the sum rounded to the model dtype.

Output layout is [rows, heads, head_dim] (rows = batch * seq, "NHD"). For attention, view it as
[B, S, H, D] and `.transpose(1, 2)`: SDPA takes that [B, H, S, D] view without a copy (its flash,
cuDNN and memory-efficient backends work in [B, S, H, D] order anyway).
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import rsqrt_f32, tl, triton
from kernels.rmsnorm import rmsnorm_ref


@triton.jit
def _round_mul(a, b):
    """a * b rounded to a's dtype, as one PyTorch elementwise op does it."""
    return (a.to(tl.float32) * b.to(tl.float32)).to(a.dtype)


@triton.jit
def _round_add(a, b):
    return (a.to(tl.float32) + b.to(tl.float32)).to(a.dtype)


@triton.jit
def norm_rope_halves(x1, x2, w1, w2, cos1, cos2, sin1, sin2, eps, HALF: tl.constexpr):
    """RMSNorm then NeoX RoPE of heads given as halves: x1, x2 [heads or rows, >= HALF] in the model
    dtype (columns past HALF zero), one head per row; the rest broadcast against them. Returns the
    rotated halves, rounded where transformers rounds."""
    x1_32, x2_32 = x1.to(tl.float32), x2.to(tl.float32)
    mean_square = (tl.sum(x1_32 * x1_32, axis=1) + tl.sum(x2_32 * x2_32, axis=1)) * (1.0 / (2 * HALF))
    inv_rms = rsqrt_f32(mean_square + eps)[:, None]
    # RMSNorm: normalised value rounded to the model dtype, then scaled (a second rounding)
    n1 = _round_mul((x1_32 * inv_rms).to(x1.dtype), w1)
    n2 = _round_mul((x2_32 * inv_rms).to(x2.dtype), w2)
    # x * cos + rotate_half(x) * sin, where rotate_half(x) = [-x2, x1]
    out1 = _round_add(_round_mul(n1, cos1), _round_mul(-n2, sin1))
    out2 = _round_add(_round_mul(n2, cos2), _round_mul(n1, sin2))
    return out1, out2


@triton.jit
def _norm_rope_heads(
    src,  # first element of n_heads heads of 2 * HALF elements each, back to back
    dst,  # first element of the output heads
    stride_dst_head,
    weight_ptr,  # [2 * HALF] norm weight
    cos_ptr,  # [2 * HALF] this row's cos
    sin_ptr,
    n_heads,
    eps,
    HALF: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    heads = tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_HALF)[None, :]  # within one half of a head
    in_half = cols < HALF
    mask = (heads < n_heads) & in_half
    lo = src + heads * (2 * HALF) + cols
    x1 = tl.load(lo, mask=mask, other=0.0)  # [BLOCK_H, BLOCK_HALF] first halves
    x2 = tl.load(lo + HALF, mask=mask, other=0.0)  # second halves
    w1 = tl.load(weight_ptr + cols, mask=in_half, other=0.0)
    w2 = tl.load(weight_ptr + HALF + cols, mask=in_half, other=0.0)
    cos1 = tl.load(cos_ptr + cols, mask=in_half, other=0.0)
    cos2 = tl.load(cos_ptr + HALF + cols, mask=in_half, other=0.0)
    sin1 = tl.load(sin_ptr + cols, mask=in_half, other=0.0)
    sin2 = tl.load(sin_ptr + HALF + cols, mask=in_half, other=0.0)
    out1, out2 = norm_rope_halves(x1, x2, w1, w2, cos1, cos2, sin1, sin2, eps, HALF)
    out_lo = dst + heads * stride_dst_head + cols
    tl.store(out_lo, out1, mask=mask)
    tl.store(out_lo + HALF, out2, mask=mask)


@triton.jit
def _qk_norm_rope_kernel(
    qkv_ptr,  # [rows, (N_Q_HEADS + 2 * N_KV_HEADS) * 2 * HALF]: q heads, then k heads, then v heads
    q_ptr,  # [rows, N_Q_HEADS, 2 * HALF]
    k_ptr,  # [rows, N_KV_HEADS, 2 * HALF]
    q_weight_ptr,  # [2 * HALF]
    k_weight_ptr,
    cos_ptr,  # [n_positions, 2 * HALF]; row r is at position r % n_positions
    sin_ptr,
    stride_qkv,  # how far to move the pointer to go one row (or one head) further, per tensor
    stride_q,
    stride_q_head,
    stride_k,
    stride_k_head,
    stride_cos,
    stride_sin,
    n_positions,
    eps,
    N_Q_HEADS: tl.constexpr,
    N_KV_HEADS: tl.constexpr,
    HALF: tl.constexpr,
    BLOCK_Q_HEADS: tl.constexpr,
    BLOCK_KV_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)  # 0: q, 1: k (v is left where it is)
    src = qkv_ptr + row * stride_qkv
    position = row % n_positions
    cos = cos_ptr + position * stride_cos
    sin = sin_ptr + position * stride_sin
    if part == 0:
        _norm_rope_heads(src, q_ptr + row * stride_q, stride_q_head, q_weight_ptr, cos, sin, N_Q_HEADS, eps,
                         HALF, BLOCK_Q_HEADS, BLOCK_HALF)
    else:
        _norm_rope_heads(src + N_Q_HEADS * 2 * HALF, k_ptr + row * stride_k, stride_k_head, k_weight_ptr,
                         cos, sin, N_KV_HEADS, eps, HALF, BLOCK_KV_HEADS, BLOCK_HALF)


def qk_norm_rope(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, cos: torch.Tensor,
                 sin: torch.Tensor, n_q_heads: int, n_kv_heads: int, eps: float, *,
                 out: tuple[torch.Tensor, torch.Tensor] | None = None,
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Heads of the fused qkv projection, q and k RMSNormed per head and rotated (NeoX RoPE).

    Parameters
    ----------
    qkv : torch.Tensor
        [rows, (n_q_heads + 2 * n_kv_heads) * D]: q heads, then k heads, then v heads, each D wide;
        fp16, bf16 or fp32, last dimension contiguous (any row stride).
    q_weight, k_weight : torch.Tensor
        [D] per-head norm weights, dtype of `qkv`. D must be even.
    cos, sin : torch.Tensor
        [rows, D], or [S, D] shared by consecutive sequences of S rows (rows % S == 0): the RoPE
        tables computed in fp32 and cast to the dtype of `qkv`, as transformers does.
    n_q_heads, n_kv_heads : int
    eps : float
        Norm epsilon.
    out : tuple of two torch.Tensor, optional
        `(q, k)` buffers shaped like the return values (any row and head strides).

    Returns
    -------
    q : torch.Tensor
        [rows, n_q_heads, D].
    k : torch.Tensor
        [rows, n_kv_heads, D].
    v : torch.Tensor
        [rows, n_kv_heads, D], a view of the v heads in `qkv` (no copy: attention takes any row stride).
    """
    rows, width = qkv.shape
    head_dim = q_weight.shape[0]
    if head_dim % 2 or width != (n_q_heads + 2 * n_kv_heads) * head_dim:
        raise ValueError(f"qkv width {width} is not (n_q_heads + 2 * n_kv_heads) * D for "
                         f"{n_q_heads} + 2 * {n_kv_heads} heads of an even D = {head_dim}")
    n_positions = cos.shape[0]
    if n_positions == 0 or rows % n_positions:
        raise ValueError(f"cos/sin have {n_positions} positions, which do not tile {rows} rows")
    check("qkv", qkv, (rows, width), FLOAT_DTYPES)
    for name, t in (("q_weight", q_weight), ("k_weight", k_weight)):
        check(name, t, (head_dim,), (qkv.dtype,))
    for name, t in (("cos", cos), ("sin", sin)):
        check(name, t, (n_positions, head_dim), (qkv.dtype,))
    device = device_of(qkv, q_weight, k_weight, cos, sin)
    q_out, k_out = out if out is not None else (None, None)
    q = output("q out", q_out, (rows, n_q_heads, head_dim), qkv.dtype, device)
    k = output("k out", k_out, (rows, n_kv_heads, head_dim), qkv.dtype, device)
    v = qkv[:, (n_q_heads + n_kv_heads) * head_dim:].unflatten(1, (n_kv_heads, head_dim))
    half = head_dim // 2
    block_half = triton.next_power_of_2(half)
    block_q_heads = triton.next_power_of_2(n_q_heads)
    with on_device(device):
        _qk_norm_rope_kernel[(rows, 2)](
            qkv, q, k, q_weight, k_weight, cos, sin,
            qkv.stride(0), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
            cos.stride(0), sin.stride(0),
            n_positions, eps,
            N_Q_HEADS=n_q_heads, N_KV_HEADS=n_kv_heads, HALF=half,
            BLOCK_Q_HEADS=block_q_heads, BLOCK_KV_HEADS=triton.next_power_of_2(n_kv_heads),
            BLOCK_HALF=block_half,
            num_warps=num_warps(2 * block_q_heads * block_half), enable_fp_fusion=False,
        )
    return q, k, v


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] over the halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def qk_norm_rope_ref(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor, n_q_heads: int, n_kv_heads: int,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Plain-PyTorch `qk_norm_rope`, operation for operation as transformers' Qwen3 attention."""
    rows, head_dim = qkv.shape[0], q_weight.shape[0]
    q, k, v = qkv.unflatten(-1, (-1, head_dim)).split([n_q_heads, n_kv_heads, n_kv_heads], dim=1)  # [rows, H, D]
    cos = cos.repeat(rows // cos.shape[0], 1)[:, None, :]  # [rows, 1, D]
    sin = sin.repeat(rows // sin.shape[0], 1)[:, None, :]
    q = rmsnorm_ref(q, q_weight, eps)
    k = rmsnorm_ref(k, k_weight, eps)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v
