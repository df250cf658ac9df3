"""Split the fused qkv projection into heads, RMSNorm q and k per head, rotate them: one launch.

Replaces Qwen3 attention's view / q_norm / k_norm / transpose / rotate-half / cat / mul / add chain
(about 15 kernels). Numerics are transformers': the per-head RMSNorm of `kernels.rmsnorm`, then
`q * cos + rotate_half(q) * sin` with each product and the sum rounded to the model dtype.

Output layout is [rows, heads, head_dim] (rows = batch * seq, "NHD"). For attention, view it as
[B, S, H, D] and `.transpose(1, 2)`: SDPA takes that [B, H, S, D] view without a copy (its flash,
cuDNN and memory-efficient backends work in [B, S, H, D] order anyway).

On request the kernel also bounds each row's v for an FP8 o_proj (`v_bound`): the attention output
is a convex combination of v rows, so a query row's o_proj input, divided by o_proj's smoothing
factors, is bounded by the largest bound of the keys it attends to (kernels.ragged_attention's FP8
output uses it as the row's scale).
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
    v_smooth_ptr,  # [N_Q_HEADS * 2 * HALF] fp32: o_proj's smoothing factors (V_BOUND only)
    v_bound_ptr,  # [rows] fp32 (V_BOUND only)
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
    V_BOUND: tl.constexpr,  # also write v_bound_ptr[row] (see _store_v_bound)
    BLOCK_D: tl.constexpr,
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
        if V_BOUND:  # the lighter half of the grid (8 KV heads against 16 query heads) also bounds v
            _store_v_bound(src + (N_Q_HEADS + N_KV_HEADS) * 2 * HALF, v_smooth_ptr, v_bound_ptr + row,
                           N_KV_HEADS, N_Q_HEADS // N_KV_HEADS, 2 * HALF, BLOCK_KV_HEADS, BLOCK_D)


@triton.jit
def _store_v_bound(v_row, smooth_ptr, bound_ptr, N_KV_HEADS: tl.constexpr, GROUPS: tl.constexpr,
                   D: tl.constexpr, BLOCK_KV_HEADS: tl.constexpr, BLOCK_D: tl.constexpr):
    """bound_ptr[0] = max over query heads h and dims d of |v[h // GROUPS, d]| / smooth[h * D + d], as
    max over KV heads g of |v[g, d]| / min over g's query heads of their smooth: IEEE division rounds
    monotonically, so both give the same fp32 (half the divisions)."""
    kv_heads = tl.arange(0, BLOCK_KV_HEADS)[:, None]
    dims = tl.arange(0, BLOCK_D)[None, :]
    ok = (kv_heads < N_KV_HEADS) & (dims < D)
    v = tl.abs(tl.load(v_row + kv_heads * D + dims, mask=ok, other=0.0).to(tl.float32))  # [BKV, BD]
    smooth = tl.load(smooth_ptr + kv_heads * GROUPS * D + dims, mask=ok, other=1.0)
    for g in tl.static_range(1, GROUPS):
        smooth = tl.minimum(smooth, tl.load(smooth_ptr + (kv_heads * GROUPS + g) * D + dims, mask=ok, other=1.0))
    bound = tl.max(tl.max(tl.math.div_rn(v, smooth), axis=1), axis=0)
    tl.store(bound_ptr + tl.arange(0, 1), tl.full((1,), 0.0, tl.float32) + bound)


def qk_norm_rope(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, cos: torch.Tensor,
                 sin: torch.Tensor, n_q_heads: int, n_kv_heads: int, eps: float, *,
                 out: tuple[torch.Tensor, torch.Tensor] | None = None,
                 v_bound: tuple[torch.Tensor, torch.Tensor] | None = None,
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
    v_bound : tuple of two torch.Tensor, optional
        `(smooth, bound)`: smooth [n_q_heads * D] fp32 (o_proj's smoothing factors, positive) and bound
        [rows] fp32, into which the kernel writes, per row r, the max over query heads h and d of
        |v[r, h // (n_q_heads // n_kv_heads), d]| / smooth[h * D + d], an IEEE division (`v_bound_ref`).

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
    v_smooth, bound = v_bound if v_bound is not None else (None, None)
    if v_bound is not None:
        if n_q_heads % n_kv_heads:
            raise ValueError(f"v_bound needs n_q_heads a multiple of n_kv_heads, got {n_q_heads}, {n_kv_heads}")
        check("v_bound smooth", v_smooth, (n_q_heads * head_dim,), (torch.float32,))
        check("v_bound", bound, (rows,), (torch.float32,))
    device = device_of(qkv, q_weight, k_weight, cos, sin, *(v_bound or ()))
    q_out, k_out = out if out is not None else (None, None)
    q = output("q out", q_out, (rows, n_q_heads, head_dim), qkv.dtype, device)
    k = output("k out", k_out, (rows, n_kv_heads, head_dim), qkv.dtype, device)
    v = qkv[:, (n_q_heads + n_kv_heads) * head_dim:].unflatten(1, (n_kv_heads, head_dim))
    half = head_dim // 2
    block_half = triton.next_power_of_2(half)
    block_q_heads = triton.next_power_of_2(n_q_heads)
    with on_device(device):
        _qk_norm_rope_kernel[(rows, 2)](
            qkv, q, k, q_weight, k_weight, cos, sin, v_smooth, bound,
            qkv.stride(0), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
            cos.stride(0), sin.stride(0),
            n_positions, eps,
            N_Q_HEADS=n_q_heads, N_KV_HEADS=n_kv_heads, HALF=half,
            BLOCK_Q_HEADS=block_q_heads, BLOCK_KV_HEADS=triton.next_power_of_2(n_kv_heads),
            BLOCK_HALF=block_half,
            V_BOUND=v_bound is not None,
            BLOCK_D=triton.next_power_of_2(head_dim),
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


def v_bound_ref(v: torch.Tensor, smooth: torch.Tensor, n_q_heads: int) -> torch.Tensor:
    """Plain-PyTorch `qk_norm_rope`'s v_bound: v [rows, Hkv, D], smooth [Hq * D] -> [rows] fp32, the max
    over query heads h and d of |v[r, h // groups, d]| / smooth[h * D + d], divided in float64 and rounded
    once (the same fp32 as IEEE fp32 division: a quotient of 24-bit values rounded to 53 bits first
    rounds the same way to 24)."""
    groups = n_q_heads // v.shape[1]
    v_q = v.double().abs().repeat_interleave(groups, dim=1)  # [rows, Hq, D]
    return (v_q / smooth.double().view(n_q_heads, -1)).amax(dim=(1, 2)).float()
