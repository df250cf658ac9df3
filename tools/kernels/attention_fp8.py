"""Prototype (not wired in): `kernels.ragged_attention` with q.k^T and p.v on FP8 (e4m3) tensor cores.

Same packed layout, key ranges, GQA grouping (both query heads of a KV head in one program) and
online softmax as the fp16 kernel; only the operands and the two products change:

- q and k: e4m3 codes with one fp32 scale = amax / 448 per (row, head) (the contract of
  `kernels.fp8_ref.quantize_rows_fp8_ref`); s = dot(q8, k8^T) * sq * sk in fp32, with log2(e)/sqrt(D)
  folded into sq. Here `quantize_attention_inputs` (PyTorch) makes them; the product would write them
  from `kernels/qk_norm_rope.py`, which already holds each (row, head) of q and k in one program.
- v: e4m3 codes with one fp32 scale per (KV head, channel), amax over all rows, applied to the
  accumulator once at the end (out = acc * sv / l). Chosen over per-(key, KV head) scales folded into
  p: p.v sums over keys, so a per-key scale cannot leave the sum and must multiply p before p's e4m3
  rounding; p * sv is then amax_v / 448 times smaller, pushing p into e4m3's subnormals (3 mantissa bits
  at 2**-6, none at 2**-9) for every key and making p's relative error grow as the scale shrinks. A
  per-channel scale factors out of the sum exactly, so v's error stays e4m3's 2**-4 of each element
  (down to amax * 2**-15, far below any value that matters). The cost: the scale needs the amax over
  the sequence (a cross-program reduction in the product; a calibrated static bound would do).
  v is stored transposed, [Hkv, D, vt_keys(S)] (keys contiguous): an FP8 wgmma takes its B operand K-major
  only, and p.v's reduction dimension is the keys.
- p: exp2(s - m + 8), in (0, 256] instead of (0, 1]: the shift is exact and cancels in acc / l, and it
  moves p's subnormal range from below 2**-6 down to below 2**-14 (p's relative rounding error stays
  2**-4 down to p = 2**-14 of the row's max). l sums p in fp32 before p's rounding, as FlashAttention-3
  does: E[e4m3(p)] ~ p, so the rounding shows as noise, |error| <= 2**-4 sum p|v| / l per channel.

Triton 3.6 on sm_90 (`python -m tools.kernels.aot_attention_fp8`): both products become e4m3 wgmma (QGMMA) only
when a program's tile has 64 rows per warpgroup (the defaults: 2 query heads x 32 rows, 4 warps); a 32-row tile
(one query head per KV head, 4 warps) falls back to fp16 mma.sync on upcast codes. Its accumulators are never
promoted to fp32 (maxNumImpreciseAcc = 2**30 in the TTGIR). The error bounds these imply are written out (and
checked) in tests/tools/test_attention_fp8.py.
"""
import math
from typing import NamedTuple

import torch

from kernels._launch import check, device_of, on_device, output
from kernels._triton import _INTERPRET, tl, triton
from kernels.fp8_ref import FP8_DTYPE, quantize_rows_fp8_ref

P_SHIFT = 8.0  # p = exp2(s - m + P_SHIFT) <= 2**8: e4m3's normal range covers p down to 2**-14 of the max
KEY_PAD = 16  # key blocks start at multiples of this (16-byte aligned loads of vt's rows)
MAX_BLOCK_N = 128  # vt is zero-padded by this many keys past S: a key block never reads past its end


class Fp8Operands(NamedTuple):
    q8: torch.Tensor  # [S, Hq, D] e4m3
    sq: torch.Tensor  # [S, Hq] fp32: amax / 448 of each (row, head)
    k8: torch.Tensor  # [S, Hkv, D] e4m3
    sk: torch.Tensor  # [S, Hkv] fp32
    vt8: torch.Tensor  # [Hkv, D, vt_keys(S)] e4m3: v transposed, keys contiguous, zero past S
    sv: torch.Tensor  # [Hkv, D] fp32: amax / 448 of each (KV head, channel) over all rows


def quantize_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Fp8Operands:
    """The kernel's FP8 operands of fp16 q [S, Hq, D], k and v [S, Hkv, D] (the prototype's separate pass)."""
    S, hq, d = q.shape
    hkv = k.shape[1]
    q8, sq = quantize_rows_fp8_ref(q.reshape(S * hq, d))
    k8, sk = quantize_rows_fp8_ref(k.reshape(S * hkv, d))
    vt = v.permute(1, 2, 0).reshape(hkv * d, S)  # rows: (KV head, channel), over all keys
    vt8, sv = quantize_rows_fp8_ref(vt)
    s_pad = vt_keys(S)
    padded = torch.zeros(hkv, d, s_pad, dtype=FP8_DTYPE, device=q.device)
    padded[:, :, :S] = vt8.reshape(hkv, d, S)
    return Fp8Operands(q8.reshape(S, hq, d), sq.reshape(S, hq), k8.reshape(S, hkv, d), sk.reshape(S, hkv), padded,
                       sv.reshape(hkv, d))


def vt_keys(S: int) -> int:
    """Length of vt's key dimension: S rounded up to KEY_PAD, plus MAX_BLOCK_N keys of zeros."""
    return triton.cdiv(S, KEY_PAD) * KEY_PAD + MAX_BLOCK_N


def dequantized(ops: Fp8Operands) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v in float64 exactly as the codes and scales represent them (the kernel's inputs, unrounded)."""
    S = ops.q8.shape[0]
    q = ops.q8.double() * ops.sq.double()[..., None]
    k = ops.k8.double() * ops.sk.double()[..., None]
    v = (ops.vt8[:, :, :S].double() * ops.sv.double()[..., None]).permute(2, 0, 1)
    return q, k, v


@triton.jit
def _round_to_e4m3(x):
    """x >= 0 (fp32, numpy's RNE arithmetic) rounded to nearest e4m3: 4 significant bits by Veltkamp's split,
    multiples of 2**-9 below 2**-6 (the subnormals)."""
    t = x * 1048577.0  # 2**20 + 1
    normal = t - (t - x)
    magic = 24576.0  # 1.5 * 2**14: x + magic rounds x to a multiple of 2**-9
    subnormal = (x + magic) - magic
    return tl.where(x < 0.015625, subnormal, normal)


@triton.jit
def _attend_block_fp8(q8, sq, acc, l_i, m_i, k_ptr, sk_ptr, vt_ptr, n0, start, end, dims, stride_ks, stride_sks,
                      stride_vtd, n_rows, P_SHIFT: tl.constexpr, INTERPRET: tl.constexpr, KEY_PAD: tl.constexpr,
                      BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """One key block of the online softmax, as `kernels.ragged_attention._attend_block` with e4m3 products."""
    keys = tl.multiple_of(n0, KEY_PAD) + tl.arange(0, BLOCK_N)
    key_rows = tl.minimum(keys, n_rows - 1) if MASKED else keys
    k8 = tl.load(k_ptr + key_rows[:, None] * stride_ks + dims[None, :])  # [BN, D] e4m3, D contiguous
    # [D, BN] e4m3, keys contiguous and 16-aligned, never clamped (vt's zero padding covers every block's end)
    vt8 = tl.load(vt_ptr + dims[:, None] * stride_vtd + keys[None, :])
    sk = tl.load(sk_ptr + key_rows * stride_sks)  # [BN] fp32
    s = tl.dot(q8, tl.trans(k8)) * sq[:, None] * sk[None, :]  # [BM, BN] fp32, base-2 logits
    if MASKED:
        allowed = (keys[None, :] >= start[:, None]) & (keys[None, :] < end[:, None])
        s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.math.exp2(s - (m_new[:, None] - P_SHIFT))  # p in (0, 2**P_SHIFT]
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if INTERPRET:  # Triton 3.6's interpreter drops the carry when a conversion to e4m3 rounds up to a new binade
        p8 = _round_to_e4m3(p).to(vt8.dtype)  # exact: rounded first
    else:
        p8 = p.to(vt8.dtype)
    acc = acc * alpha[:, None] + tl.dot(p8, tl.trans(vt8))
    return acc, l_i, m_new


@triton.jit
def _ragged_attention_fp8_kernel(
    q_ptr, sq_ptr, k_ptr, sk_ptr, vt_ptr, sv_ptr, o_ptr,
    start_ptr, end_ptr,
    stride_qs, stride_qh, stride_sqs, stride_ks, stride_kh, stride_sks, stride_vth, stride_vtd, stride_os, stride_oh,
    n_rows, qk_scale,
    P_SHIFT: tl.constexpr,
    KEY_PAD: tl.constexpr,
    GROUPS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    tile = tl.arange(0, GROUPS * BLOCK_M)  # the query heads of one KV head stacked along M
    head = tl.program_id(1) * GROUPS + tile // BLOCK_M
    kv_head = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tile % BLOCK_M
    row_ok = rows < n_rows
    start = tl.load(start_ptr + rows, mask=row_ok, other=n_rows)
    end = tl.load(end_ptr + rows, mask=row_ok, other=0)
    lo = tl.min(start, axis=0)
    hi = tl.max(end, axis=0)
    # key blocks start on multiples of KEY_PAD (16-byte aligned rows of vt: vectorised, pipelined loads), so a
    # tile whose first key is not aligned starts with one masked head block below it
    aligned_lo = lo // KEY_PAD * KEY_PAD
    head_end = aligned_lo + tl.where(aligned_lo == lo, 0, BLOCK_N)
    shared_end = tl.min(tl.where(row_ok, end, n_rows), axis=0)
    same_start = tl.max(tl.where(row_ok, start, 0), axis=0) == lo
    whole_blocks = tl.where(same_start & (shared_end > head_end), (shared_end - head_end) // BLOCK_N, 0)
    unmasked_end = head_end + whole_blocks * BLOCK_N
    dims = tl.arange(0, HEAD_DIM)
    q8 = tl.load(q_ptr + rows[:, None] * stride_qs + head[:, None] * stride_qh + dims[None, :], mask=row_ok[:, None],
                 other=0.0)  # [GROUPS * BM, D] e4m3
    sq = tl.load(sq_ptr + rows * stride_sqs + head, mask=row_ok, other=0.0) * qk_scale
    m_i = tl.full((GROUPS * BLOCK_M,), -1.0e30, tl.float32)
    l_i = tl.zeros((GROUPS * BLOCK_M,), tl.float32)
    acc = tl.zeros((GROUPS * BLOCK_M, HEAD_DIM), tl.float32)
    k_head = k_ptr + kv_head * stride_kh
    sk_head = sk_ptr + kv_head
    vt_head = vt_ptr + kv_head * stride_vth
    for n0 in range(aligned_lo, head_end, BLOCK_N):
        acc, l_i, m_i = _attend_block_fp8(q8, sq, acc, l_i, m_i, k_head, sk_head, vt_head, n0, start, end, dims,
                                          stride_ks, stride_sks, stride_vtd, n_rows, P_SHIFT, _INTERPRET, KEY_PAD,
                                          BLOCK_N, True)
    for n0 in range(head_end, unmasked_end, BLOCK_N):
        acc, l_i, m_i = _attend_block_fp8(q8, sq, acc, l_i, m_i, k_head, sk_head, vt_head, n0, start, end, dims,
                                          stride_ks, stride_sks, stride_vtd, n_rows, P_SHIFT, _INTERPRET, KEY_PAD,
                                          BLOCK_N, False)
    for n0 in range(unmasked_end, hi, BLOCK_N):
        acc, l_i, m_i = _attend_block_fp8(q8, sq, acc, l_i, m_i, k_head, sk_head, vt_head, n0, start, end, dims,
                                          stride_ks, stride_sks, stride_vtd, n_rows, P_SHIFT, _INTERPRET, KEY_PAD,
                                          BLOCK_N, True)
    sv = tl.load(sv_ptr + kv_head * HEAD_DIM + dims)  # [D]
    out = acc * sv[None, :] / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(o_ptr + rows[:, None] * stride_os + head[:, None] * stride_oh + dims[None, :],
             out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


def ragged_attention_fp8(ops: Fp8Operands, key_start: torch.Tensor, key_end: torch.Tensor, *,
                         out: torch.Tensor | None = None, block_m: int = 32, block_n: int = 64, num_warps: int = 4,
                         num_stages: int = 3) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v from `quantize_attention_inputs`' operands, row r restricted to keys
    key_start[r] <= j < key_end[r] ([S] int32, non-empty); [S, Hq, D] fp16 (or into `out`)."""
    S, hq, d = ops.q8.shape
    hkv = ops.k8.shape[1]
    if hq % hkv or d < 32 or d & (d - 1) or block_n < 32 or block_n > MAX_BLOCK_N:
        raise ValueError(f"need Hq a multiple of Hkv, a power-of-two head_dim >= 32 and 32 <= block_n <= "
                         f"{MAX_BLOCK_N} (FP8 MMAs take 32 products a step), got {hq}, {hkv}, {d}, {block_n}")
    check("q8", ops.q8, (S, hq, d), (FP8_DTYPE,))
    check("sq", ops.sq, (S, hq), (torch.float32,))
    check("k8", ops.k8, (S, hkv, d), (FP8_DTYPE,))
    check("sk", ops.sk, (S, hkv), (torch.float32,))
    check("vt8", ops.vt8, (hkv, d, vt_keys(S)), (FP8_DTYPE,))
    check("sv", ops.sv, (hkv, d), (torch.float32,))
    check("key_start", key_start, (S,), (torch.int32,))
    check("key_end", key_end, (S,), (torch.int32,))
    device = device_of(*ops, key_start, key_end)
    if not ops.sv.is_contiguous() or ops.sq.stride(1) != 1 or ops.sk.stride(1) != 1:
        raise ValueError("sv must be contiguous and sq, sk contiguous along heads")
    o = output("out", out, (S, hq, d), torch.float16, device)
    with on_device(device):
        _ragged_attention_fp8_kernel[(triton.cdiv(S, block_m), hkv)](
            ops.q8, ops.sq, ops.k8, ops.sk, ops.vt8, ops.sv, o, key_start, key_end,
            ops.q8.stride(0), ops.q8.stride(1), ops.sq.stride(0), ops.k8.stride(0), ops.k8.stride(1),
            ops.sk.stride(0), ops.vt8.stride(0), ops.vt8.stride(1), o.stride(0), o.stride(1),
            S, math.log2(math.e) / math.sqrt(d),
            P_SHIFT=P_SHIFT, KEY_PAD=KEY_PAD, GROUPS=hq // hkv, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
            num_warps=num_warps, num_stages=num_stages,
        )
    return o
