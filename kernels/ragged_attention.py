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
"""
import math

import torch

from kernels._launch import check, device_of, on_device, output
from kernels._triton import tl, triton

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


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
    tl.store(o_ptr + rows[:, None] * stride_os + head[:, None] * stride_oh + dims[None, :],
             out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


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
    S, hq, d = q.shape
    hkv = k.shape[1]
    if hq % hkv or d < 16 or d & (d - 1):
        raise ValueError(f"need Hq a multiple of Hkv and a power-of-two head_dim >= 16, got {hq}, {hkv}, {d}")
    check("q", q, (S, hq, d), _DTYPES)
    check("k", k, (S, hkv, d), (q.dtype,))
    check("v", v, (S, hkv, d), (q.dtype,))
    check("key_start", key_start, (S,), (torch.int32,))
    check("key_end", key_end, (S,), (torch.int32,))
    device = device_of(q, k, v, key_start, key_end)
    o = output("out", out, (S, hq, d), q.dtype, device)
    heads = hq // hkv if group_heads else 1
    grid = (triton.cdiv(S, block_m), hq // heads)
    with on_device(device):
        _ragged_attention_kernel[grid](
            q, k, v, o, key_start, key_end,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), o.stride(0), o.stride(1),
            S, math.log2(math.e) / math.sqrt(d),
            GROUPS=hq // hkv, HEADS=heads, IEEE=q.dtype == torch.float32, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
            MASK_ALL=mask_all,
            num_warps=num_warps, num_stages=num_stages,
        )
    return o


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
