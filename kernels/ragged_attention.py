"""Bidirectional attention over packed sequences: each query row attends to one contiguous range
of keys (its own sequence), and blocks of keys outside every range of a query tile are never
computed.

This is what the graph runner's packed CFG layout needs: [prompt | uncond target | pads] in one
sequence, block-diagonal attention. A dense kernel with an additive mask does all S^2 dot products;
this one does about c^2 + T^2. The ranges are device tensors read by the kernel, so one CUDA graph
per bucket serves every (c, T) that fits it. GQA is handled by indexing: query head h reads
key/value head h // (n_q_heads // n_kv_heads); by default the query heads of one KV head share a
program, so each K/V block is loaded once for them.

A program's keys start at its rows' first key, not at the block boundary below it, and the blocks
all of its rows see whole (every row of a tile inside one sequence: all but its last block) skip the
mask; keys past the end are read clamped to the last row and masked, not predicated.

Numerics are flash attention's: q.k in fp32 (the dot product of 16-bit inputs), an online softmax
in fp32 (base-2 exponentials of pre-scaled scores), probabilities rounded to the input dtype for
the p.v product, fp32 accumulation, one rounding at the end.

FP8 output (`ragged_attention_fp8`, for an FP8 o_proj): the output is quantized in the epilogue, but a
row's amax spans all query heads, which no program sees together. A bound known beforehand serves
instead: out[r, h, :] is a convex combination of the v rows of r's keys, so |out[r, h, d]| / smooth[h D + d]
<= max over r's keys j of v_bound[j] (`kernels.qk_norm_rope`'s v_bound: max over h, d of
|v[j, h // groups, d]| / smooth[h D + d]). Each program keeps that max for its rows over their own keys
(masked exactly as the scores are), so every program of a row reaches the same value, and the row's
scale is bound / FP8_MAX, as `kernels.fp8`'s quantizer makes amax / FP8_MAX. Error: e4m3 rounds a
code c to within 2^-4 |c| when |c| >= 2^-6 (3 mantissa bits) and within 2^-10 below (subnormals), so
with a bound B >= amax each element of out / smooth is off by at most max(2^-4 |x|, 2^-10 B / 448) in
place of max(2^-4 |x|, 2^-10 amax / 448): only elements below B / 28672 lose relative precision, and a
bound even 100x the amax keeps every element above amax / 287 at 3 mantissa bits. The convex bound
holds up to rounding: the probabilities rounded to the input dtype for p.v, the fp32 sums and the
rounding of out to the model dtype can put |out| up to about 3 units of 2^-11 (fp16) or 2^-8 (bf16) above
B, so codes are clamped to +-FP8_MAX (a clamp by less than e4m3's half-spacing at 448, 16, changes no code).
"""
import math

import torch

from kernels._launch import check, device_of, on_device, output
from kernels._triton import HAS_TRITON, tl, triton
from kernels.fp8 import FP8Rows, e4m3_codes, new_fp8_rows
from kernels.fp8_ref import FP8_DTYPE, FP8_MAX, e4m3_codes_ref

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_E4M3_MAX = tl.constexpr(FP8_MAX) if HAS_TRITON else None


@triton.jit
def _max_over_keys(v_bound_ptr, lo, hi, start, end, n_rows, BLOCK_N: tl.constexpr):
    """Per row, the max of v_bound over the row's own keys start <= j < end (lo, hi: the tile's union)."""
    bound = tl.zeros(start.shape, tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        keys = n0 + tl.arange(0, BLOCK_N)
        key_bounds = tl.load(v_bound_ptr + tl.minimum(keys, n_rows - 1))  # [BN]
        seen = (keys[None, :] >= start[:, None]) & (keys[None, :] < end[:, None])
        bound = tl.maximum(bound, tl.max(tl.where(seen, key_bounds[None, :], 0.0), axis=1))
    return bound


@triton.jit
def _attend_block(q, acc, l_i, m_i, k_ptr, v_ptr, n0, start, end, dims, stride_ks, stride_vs, n_rows, qk_scale,
                  IEEE: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """One key block of the online softmax. MASKED: keys outside a row's range get probability 0;
    otherwise every key of the block is in every row's range (no mask, no bounds check)."""
    keys = n0 + tl.arange(0, BLOCK_N)
    key_rows = tl.minimum(keys, n_rows - 1) if MASKED else keys
    k_ptrs = k_ptr + key_rows[:, None] * stride_ks + dims[None, :]
    v_ptrs = v_ptr + key_rows[:, None] * stride_vs + dims[None, :]
    k = tl.load(k_ptrs)  # [BN, D]; keys past the last row are read clamped to it and masked below
    v = tl.load(v_ptrs)
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    if MASKED:
        allowed = (keys[None, :] >= start[:, None]) & (keys[None, :] < end[:, None])
        s = tl.where(allowed, s * qk_scale, float("-inf"))  # [BM, BN] fp32, base-2 logits
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if IEEE:
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, l_i, m_new


@triton.jit
def _ragged_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr,  # q/o [S, Hq, D], k/v [S, Hkv, D] (any row and head strides)
    start_ptr, end_ptr,  # [S] int32: query row r attends to keys start[r] <= key < end[r]
    stride_qs, stride_qh, stride_ks, stride_kh, stride_vs, stride_vh, stride_os, stride_oh,
    n_rows, qk_scale,  # qk_scale = log2(e) / sqrt(D): scores go straight to base 2
    GROUPS: tl.constexpr,
    HEADS: tl.constexpr,  # query heads per program: 1, or GROUPS (K/V blocks loaded once per group)
    IEEE: tl.constexpr,  # fp32 inputs: exact fp32 products (else tf32 on the GPU)
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASK_ALL: tl.constexpr,  # mask every key block, else not the whole blocks that every row sees
    FP8: tl.constexpr,  # o_ptr takes e4m3 codes of out / smooth, scales_ptr each row's scale (see below)
    v_bound_ptr,  # FP8: [S] fp32, kernels.qk_norm_rope's v bound of each key row
    smooth_ptr,  # FP8: [Hq * D] fp32, o_proj's smoothing factors
    scales_ptr,  # FP8: [S] fp32, the rows' scales (written)
):
    tile = tl.arange(0, HEADS * BLOCK_M)  # HEADS query heads of one KV group stacked along M
    head = tl.program_id(1) * HEADS + tile // BLOCK_M  # [HEADS * BM]
    kv_head = (tl.program_id(1) * HEADS) // GROUPS
    rows = tl.program_id(0) * BLOCK_M + tile % BLOCK_M
    row_ok = rows < n_rows
    start = tl.load(start_ptr + rows, mask=row_ok, other=n_rows)  # [HEADS * BM]
    end = tl.load(end_ptr + rows, mask=row_ok, other=0)
    lo = tl.min(start, axis=0)  # the tile's keys: the union of its rows' ranges, from its first key on
    hi = tl.max(end, axis=0)
    # whole blocks from lo on that are inside every row's range need no mask: all rows start at lo then
    shared_end = tl.min(tl.where(row_ok, end, n_rows), axis=0)
    same_start = tl.max(tl.where(row_ok, start, 0), axis=0) == lo
    unmasked_end = lo + tl.where(same_start, (shared_end - lo) // BLOCK_N * BLOCK_N, 0)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + rows[:, None] * stride_qs + head[:, None] * stride_qh + dims[None, :], mask=row_ok[:, None],
                other=0.0)  # [HEADS * BM, D]
    m_i = tl.full((HEADS * BLOCK_M,), -1.0e30, tl.float32)  # finite: a row with no key in a block stays NaN-free
    l_i = tl.zeros((HEADS * BLOCK_M,), tl.float32)
    acc = tl.zeros((HEADS * BLOCK_M, HEAD_DIM), tl.float32)
    if FP8:  # before the loop, not after: fewer registers live (196 against 244 on sm_90, tools.kernels.aot)
        bound = _max_over_keys(v_bound_ptr, lo, hi, start, end, n_rows, BLOCK_N)  # every program of a row: the same
    k_head = k_ptr + kv_head * stride_kh
    v_head = v_ptr + kv_head * stride_vh
    if MASK_ALL:
        unmasked_end = lo
    else:
        for n0 in range(lo, unmasked_end, BLOCK_N):
            acc, l_i, m_i = _attend_block(q, acc, l_i, m_i, k_head, v_head, n0, start, end, dims, stride_ks,
                                          stride_vs, n_rows, qk_scale, IEEE, BLOCK_N, False)
    for n0 in range(unmasked_end, hi, BLOCK_N):
        acc, l_i, m_i = _attend_block(q, acc, l_i, m_i, k_head, v_head, n0, start, end, dims, stride_ks, stride_vs,
                                      n_rows, qk_scale, IEEE, BLOCK_N, True)
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # 0 only in rows past the end
    o_ptrs = o_ptr + rows[:, None] * stride_os + head[:, None] * stride_oh + dims[None, :]
    if FP8:
        out = out.to(q_ptr.dtype.element_ty).to(tl.float32)  # rounded as the model rounds o_proj's input
        smoothed = tl.math.div_rn(out, tl.load(smooth_ptr + head[:, None] * HEAD_DIM + dims[None, :]))
        scale = tl.math.div_rn(bound, tl.full((HEADS * BLOCK_M,), _E4M3_MAX, tl.float32))  # the same in every program
        tl.store(o_ptrs, e4m3_codes(smoothed, scale[:, None]), mask=row_ok[:, None])
        tl.store(scales_ptr + rows, scale, mask=row_ok)
    else:
        tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


def ragged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_start: torch.Tensor,
                     key_end: torch.Tensor, *, out: torch.Tensor | None = None, block_m: int = 32,
                     block_n: int = 64, num_warps: int = 4, num_stages: int = 3,
                     group_heads: bool = True, mask_all: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v with row r restricted to keys key_start[r] <= j < key_end[r].

    Parameters
    ----------
    q : torch.Tensor
        [S, Hq, D] fp16, bf16 or fp32 (rows, heads, head_dim; head_dim contiguous, a power of two >= 16).
    k, v : torch.Tensor
        [S, Hkv, D], same dtype; Hq must be a multiple of Hkv (grouped-query attention).
    key_start, key_end : torch.Tensor
        [S] int32 on the same device; every range must be non-empty.
    out : torch.Tensor, optional
        [S, Hq, D] buffer to write into (e.g. a view of the [S, Hq * D] input of o_proj).
    block_m, block_n, num_warps, num_stages, group_heads, mask_all
        Tile shape and launch settings. group_heads: one program per KV head and row tile, its query
        heads stacked (block_m rows each), so each K/V block is loaded once per group instead of once
        per query head. mask_all: mask every key block (one loop), not only those some row of the
        tile does not see whole. The defaults: of fourteen settings timed on an H200, the fastest for
        one request among those faster than the previous kernel for one request and for eight at once
        (`python -m tools.kernels.bench_attention`, BENCHMARKS.md).

    Returns
    -------
    torch.Tensor
        [S, Hq, D] in q's dtype.
    """
    S, hq, d = _check_operands(q, k, v, key_start, key_end)
    device = device_of(q, k, v, key_start, key_end)
    o = output("out", out, (S, hq, d), q.dtype, device)
    _launch(q, k, v, key_start, key_end, o, (o.stride(0), o.stride(1)), None, device, block_m=block_m,
            block_n=block_n, num_warps=num_warps, num_stages=num_stages, group_heads=group_heads, mask_all=mask_all)
    return o


def ragged_attention_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_start: torch.Tensor,
                         key_end: torch.Tensor, *, v_bound: torch.Tensor, smooth: torch.Tensor,
                         out: FP8Rows | None = None, **settings) -> FP8Rows:
    """`ragged_attention` handed to an FP8 o_proj as e4m3 codes of out / smooth with one scale per row.

    Row r's scale is max(v_bound[key_start[r]:key_end[r]]) / FP8_MAX, a bound of its smoothed output
    known before the output is (see the module docstring), the same in every program that writes row r.

    Parameters
    ----------
    q, k, v, key_start, key_end
        As for `ragged_attention`.
    v_bound : torch.Tensor
        [S] fp32: per key row, the max over query heads h and d of |v[j, h // groups, d]| / smooth[h * D + d]
        (`kernels.qk_norm_rope`'s v_bound).
    smooth : torch.Tensor
        [Hq * D] fp32, o_proj's smoothing factors (positive).
    out : FP8Rows, optional
        codes [S, Hq * D] e4m3 and scales [S] fp32 to write into (`kernels.fp8.new_fp8_rows`).
    settings
        `ragged_attention`'s tile and launch settings.

    Returns
    -------
    FP8Rows
        codes of out[r] / smooth / scales[r], rounded to e4m3 from out rounded to q's dtype, and scales.
    """
    S, hq, d = _check_operands(q, k, v, key_start, key_end)
    check("v_bound", v_bound, (S,), (torch.float32,))
    check("smooth", smooth, (hq * d,), (torch.float32,))
    device = device_of(q, k, v, key_start, key_end, v_bound, smooth)
    rows = out if out is not None else new_fp8_rows(torch.Size((S, hq * d)), q.dtype, device)
    output("out codes", rows.codes, (S, hq * d), FP8_DTYPE, device)
    output("out scales", rows.scales, (S,), torch.float32, device)
    _launch(q, k, v, key_start, key_end, rows.codes, (rows.codes.stride(0), d), (v_bound, smooth, rows.scales),
            device, **settings)
    return rows


def _check_operands(q, k, v, key_start, key_end) -> tuple[int, int, int]:
    S, hq, d = q.shape
    hkv = k.shape[1]
    if hq % hkv or d < 16 or d & (d - 1):
        raise ValueError(f"need Hq a multiple of Hkv and a power-of-two head_dim >= 16, got {hq}, {hkv}, {d}")
    check("q", q, (S, hq, d), _DTYPES)
    check("k", k, (S, hkv, d), (q.dtype,))
    check("v", v, (S, hkv, d), (q.dtype,))
    check("key_start", key_start, (S,), (torch.int32,))
    check("key_end", key_end, (S,), (torch.int32,))
    return S, hq, d


def _launch(q, k, v, key_start, key_end, o, o_strides: tuple[int, int], fp8: tuple | None, device, *,
            block_m: int = 32, block_n: int = 64, num_warps: int = 4, num_stages: int = 3, group_heads: bool = True,
            mask_all: bool = False) -> None:
    """Launch the kernel writing o (strides (row, head)); fp8 = (v_bound, smooth, scales) or None."""
    S, hq, d = q.shape
    hkv = k.shape[1]
    heads = hq // hkv if group_heads else 1
    grid = (triton.cdiv(S, block_m), hq // heads)
    v_bound, smooth, scales = fp8 if fp8 is not None else (None, None, None)
    with on_device(device):
        _ragged_attention_kernel[grid](
            q, k, v, o, key_start, key_end,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), *o_strides,
            S, math.log2(math.e) / math.sqrt(d),
            GROUPS=hq // hkv, HEADS=heads, IEEE=q.dtype == torch.float32, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
            MASK_ALL=mask_all, FP8=fp8 is not None, v_bound_ptr=v_bound, smooth_ptr=smooth, scales_ptr=scales,
            num_warps=num_warps, num_stages=num_stages,
        )


def key_range_mask(key_start: torch.Tensor, key_end: torch.Tensor) -> torch.Tensor:
    """[S, S] bool: row r may attend to key j (key_start[r] <= j < key_end[r])."""
    keys = torch.arange(key_start.shape[0], device=key_start.device)
    return (keys >= key_start[:, None]) & (keys < key_end[:, None])


def ragged_attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_start: torch.Tensor,
                         key_end: torch.Tensor) -> torch.Tensor:
    """Plain-PyTorch `ragged_attention`: SDPA over the whole sequence under the equivalent mask."""
    groups = q.shape[1] // k.shape[1]
    qh, kh, vh = (t.transpose(0, 1) for t in (q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)))
    mask = key_range_mask(key_start, key_end)
    return torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask).transpose(0, 1)


def v_bound_row_scales_ref(key_start: torch.Tensor, key_end: torch.Tensor, v_bound: torch.Tensor) -> torch.Tensor:
    """[S] fp32 scales of `ragged_attention_fp8`: max of v_bound over each row's keys / FP8_MAX (IEEE)."""
    seen = key_range_mask(key_start, key_end)  # [S, S]
    bound = torch.where(seen, v_bound[None, :], torch.zeros((), device=v_bound.device)).amax(dim=1)
    return bound / torch.full((), FP8_MAX, device=bound.device)


def ragged_attention_fp8_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_start: torch.Tensor,
                             key_end: torch.Tensor, v_bound: torch.Tensor,
                             smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-PyTorch `ragged_attention_fp8`: (codes [S, Hq * D], scales [S]) of the reference attention
    rounded to q's dtype, divided by smooth and quantized at the v-bound scales."""
    out = ragged_attention_ref(q, k, v, key_start, key_end).flatten(1)  # [S, Hq * D] in q's dtype
    scales = v_bound_row_scales_ref(key_start, key_end, v_bound)
    return e4m3_codes_ref(out.float() / smooth, scales), scales
