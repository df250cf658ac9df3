"""Hopper GEMMs (TMA tensor descriptors, persistent tiles) with the next elementwise kernel in the epilogue:
the measured candidate for fewer kernels per layer (`tools.kernels.bench_gemm_fused`; BENCHMARKS.md, issue 22).

Measured on the H200 (Triton 3.6) these are slower than cuBLAS followed by the separate kernel at the
baseline's 896 rows and at 8 takes' 7168, so the model does not use them; they stay here, beside their
bench, as the instrument for the next attempt (a Triton with Hopper warp specialisation, or CUTLASS).

`x @ weight.T` for nn.Linear weights [N, K], each output tile accumulated as two halves of BH weight
rows, so an epilogue sees matching halves side by side without reshuffling registers:
- `linear`: the halves are adjacent columns (a plain GEMM, tile 2 BH wide).
- `linear_swiglu`: gate rows and the matching up rows of the fused gate_up weight; writes
  silu(gate) * up directly (kernels.swiglu's numerics), so the 2I-wide gate_up never reaches memory.
- `linear_qk_norm_rope`: the two halves of one head of the fused qkv weight (BH = head_dim / 2); q and
  k heads are RMSNormed and rotated (kernels.qk_norm_rope's numerics), v heads stored as they are.
Each GEMM output is rounded to the model dtype before its epilogue, as the separate kernels read it,
so the fused result equals this GEMM followed by the separate kernel (SwiGLU bit for bit; q/k-norm up
to the order a head's RMS is summed in). Hopper (sm_90) or Triton's interpreter: TMA descriptors.
"""
import functools

import torch

from kernels._launch import check, device_of, on_device, output
from kernels._triton import HAS_TRITON, tl, triton
from kernels.qk_norm_rope import norm_rope_halves
from kernels.swiglu import silu_mul

if HAS_TRITON:
    from triton.tools.tensor_descriptor import TensorDescriptor

PLAIN, SWIGLU, QK_NORM_ROPE = 0, 1, 2  # epilogues
_SWIGLU, _QK_NORM_ROPE = tl.constexpr(SWIGLU), tl.constexpr(QK_NORM_ROPE)  # as kernels see them
_DTYPES = (torch.float16, torch.bfloat16)


@triton.jit
def _fused_gemm_kernel(
    a_desc,  # [M, K] activations, blocks [BM, BK]
    w_desc,  # [N, K] weight, blocks [BH, BK]
    out_ptr,  # [M, out columns]
    stride_out,  # how far to move the pointer to go one row down, per tensor
    q_weight_ptr,  # [2 BH] (QK_NORM_ROPE only)
    k_weight_ptr,
    cos_ptr,  # [n_positions, 2 BH]; row r is at position r % n_positions (QK_NORM_ROPE only)
    sin_ptr,
    stride_cos,
    stride_sin,
    n_positions,
    eps,
    M,
    K,
    n_tiles_n,  # output tiles across
    up_row,  # SWIGLU: first weight row of the up half
    N_Q_HEADS: tl.constexpr,  # QK_NORM_ROPE: heads [0, N_Q_HEADS) are q, then N_KV_HEADS k heads, then v
    N_KV_HEADS: tl.constexpr,
    EPILOGUE: tl.constexpr,
    BM: tl.constexpr,
    BH: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    n_tiles_m = tl.cdiv(M, BM)
    k_tiles = tl.cdiv(K, BK)
    tiles_per_group = GROUP_M * n_tiles_n
    for tile in range(tl.program_id(0), n_tiles_m * n_tiles_n, tl.num_programs(0)):
        # grouped order: GROUP_M row tiles share each weight tile while it is in L2
        first_m = (tile // tiles_per_group) * GROUP_M
        group_rows = min(n_tiles_m - first_m, GROUP_M)
        tile_m = first_m + (tile % tiles_per_group) % group_rows
        tile_n = (tile % tiles_per_group) // group_rows
        row0 = tile_m * BM
        if EPILOGUE == _SWIGLU:
            lo_row = tile_n * BH
            hi_row = up_row + lo_row
        else:
            lo_row = tile_n * 2 * BH
            hi_row = lo_row + BH
        acc_lo = tl.zeros((BM, BH), tl.float32)
        acc_hi = tl.zeros((BM, BH), tl.float32)
        for k in tl.range(0, k_tiles, warp_specialize=WARP_SPECIALIZE):
            a = a_desc.load([row0, k * BK])  # rows past M read as zeros
            acc_lo = tl.dot(a, w_desc.load([lo_row, k * BK]).T, acc_lo)
            acc_hi = tl.dot(a, w_desc.load([hi_row, k * BK]).T, acc_hi)
        dtype = out_ptr.dtype.element_ty
        lo = acc_lo.to(dtype)  # [BM, BH] the GEMM's output as the separate kernels would read it
        hi = acc_hi.to(dtype)
        rows = row0 + tl.arange(0, BM)[:, None]
        cols = tl.arange(0, BH)[None, :]
        row_ok = rows < M
        out_row = out_ptr + rows.to(tl.int64) * stride_out
        if EPILOGUE == _SWIGLU:
            tl.store(out_row + tile_n * BH + cols, silu_mul(lo, hi).to(dtype), mask=row_ok)
        else:
            if EPILOGUE == _QK_NORM_ROPE:
                if tile_n < N_Q_HEADS + N_KV_HEADS:  # v heads (the rest) are stored as they are
                    if tile_n < N_Q_HEADS:
                        norm_weight = q_weight_ptr
                    else:
                        norm_weight = k_weight_ptr
                    position = rows % n_positions
                    cos = cos_ptr + position * stride_cos + cols
                    sin = sin_ptr + position * stride_sin + cols
                    lo, hi = norm_rope_halves(lo, hi, tl.load(norm_weight + cols), tl.load(norm_weight + BH + cols),
                                              tl.load(cos), tl.load(cos + BH), tl.load(sin), tl.load(sin + BH),
                                              eps, BH)
            tl.store(out_row + lo_row + cols, lo, mask=row_ok)
            tl.store(out_row + hi_row + cols, hi, mask=row_ok)


@functools.cache
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


# (BM, BH, BK, warps, stages, programs per multiprocessor (0: one program per tile), warp specialisation)
DEFAULT_TILES = {PLAIN: (128, 64, 64, 8, 4, 0, False), SWIGLU: (128, 64, 64, 8, 4, 0, False),
                 QK_NORM_ROPE: (128, 64, 64, 8, 4, 0, False)}


def _launch(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, epilogue: int, n_tiles_n: int, *,
            tiles: tuple | None, up_row: int = 0, norm=None) -> None:
    bm, bh, bk, warps, stages, per_sm, ws = tiles or DEFAULT_TILES[epilogue]
    m, k = x.shape
    if k % 8:
        raise ValueError(f"K = {k}: TMA needs rows of a multiple of 16 bytes")
    q_weight, k_weight, cos, sin, n_q, n_kv, eps = norm or (out, out, out, out, 0, 0, 0.0)
    n_tiles = triton.cdiv(m, bm) * n_tiles_n
    programs = n_tiles if per_sm == 0 or out.device.type != "cuda" else min(
        n_tiles, per_sm * _multiprocessors(out.device.index))
    a_desc = TensorDescriptor.from_tensor(x, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(weight, [bh, bk])
    with on_device(out.device):
        _fused_gemm_kernel[(programs,)](
            a_desc, w_desc, out, out.stride(0), q_weight, k_weight, cos, sin,
            cos.stride(0), sin.stride(0), cos.shape[0], eps, m, k, n_tiles_n, up_row,
            N_Q_HEADS=n_q, N_KV_HEADS=n_kv, EPILOGUE=epilogue, BM=bm, BH=bh, BK=bk, GROUP_M=8,
            WARP_SPECIALIZE=ws, num_warps=warps, num_stages=stages, enable_fp_fusion=False,
        )


def _check_operands(x: torch.Tensor, weight: torch.Tensor) -> tuple[int, int, torch.device]:
    m, k = x.shape
    check("x", x, (m, k), _DTYPES)
    check("weight", weight, (weight.shape[0], k), (x.dtype,))
    for name, t in (("x", x), ("weight", weight)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous for TMA, got strides {t.stride()}")
    return m, weight.shape[0], device_of(x, weight)


def linear(x: torch.Tensor, weight: torch.Tensor, *, out: torch.Tensor | None = None,
           tiles: tuple | None = None) -> torch.Tensor:
    """x [M, K] @ weight.T ([N, K], nn.Linear's layout) -> [M, N], fp16/bf16 accumulated in fp32.

    Both contiguous, K a multiple of 8, N of the tile width 2 BH; `out` any row stride; `tiles` =
    (BM, BH, BK, warps, stages, programs per multiprocessor or 0 for one per tile, warp specialisation).
    """
    m, n, device = _check_operands(x, weight)
    bh = (tiles or DEFAULT_TILES[PLAIN])[1]
    if n % (2 * bh):
        raise ValueError(f"N = {n} is not a multiple of the tile width {2 * bh}")
    out = output("out", out, (m, n), x.dtype, device)
    _launch(x, weight, out, PLAIN, n // (2 * bh), tiles=tiles)
    return out


def linear_swiglu(x: torch.Tensor, gate_up_weight: torch.Tensor, *, out: torch.Tensor | None = None,
                  tiles: tuple | None = None) -> torch.Tensor:
    """swiglu(x @ gate_up_weight.T) -> [M, I] without the [M, 2I] intermediate: gate_up_weight [2I, K] is
    the gate rows, then the up rows, I a multiple of BH. Equal bit for bit to `kernels.swiglu.swiglu` of
    `linear(x, gate_up_weight)`; arguments otherwise as for `linear`.
    """
    m, n, device = _check_operands(x, gate_up_weight)
    bh = (tiles or DEFAULT_TILES[SWIGLU])[1]
    if n % (2 * bh):
        raise ValueError(f"gate_up rows {n} are not two halves of a multiple of BH = {bh}")
    out = output("out", out, (m, n // 2), x.dtype, device)
    _launch(x, gate_up_weight, out, SWIGLU, n // (2 * bh), tiles=tiles, up_row=n // 2)
    return out


def linear_qk_norm_rope(x: torch.Tensor, qkv_weight: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                        cos: torch.Tensor, sin: torch.Tensor, n_q_heads: int, n_kv_heads: int, eps: float, *,
                        out: torch.Tensor | None = None, tiles: tuple | None = None,
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`kernels.qk_norm_rope.qk_norm_rope` of `linear(x, qkv_weight)` in one pass: q [M, n_q_heads, D],
    k and v [M, n_kv_heads, D], views of one [M, (n_q_heads + 2 n_kv_heads) D] buffer (`out`, any row
    stride). D a multiple of 32 (BH = D / 2 whatever `tiles` says); the norm and RoPE arguments as for
    qk_norm_rope; the rest as for `linear`.
    """
    m, n, device = _check_operands(x, qkv_weight)
    head_dim = q_weight.shape[0]
    n_heads = n_q_heads + 2 * n_kv_heads
    if head_dim % 32 or n != n_heads * head_dim:
        raise ValueError(f"qkv rows {n} are not {n_heads} heads of a D = {head_dim} that is a multiple of 32")
    n_positions = cos.shape[0]
    if n_positions == 0 or m % n_positions:
        raise ValueError(f"cos/sin have {n_positions} positions, which do not tile {m} rows")
    for name, t in (("q_weight", q_weight), ("k_weight", k_weight)):
        check(name, t, (head_dim,), (x.dtype,))
    for name, t in (("cos", cos), ("sin", sin)):
        check(name, t, (n_positions, head_dim), (x.dtype,))
    device = device_of(x, qkv_weight, q_weight, k_weight, cos, sin)
    out = output("out", out, (m, n), x.dtype, device)
    bm, _, *rest = tiles or DEFAULT_TILES[QK_NORM_ROPE]
    _launch(x, qkv_weight, out, QK_NORM_ROPE, n_heads, tiles=(bm, head_dim // 2, *rest),
            norm=(q_weight.contiguous(), k_weight.contiguous(), cos, sin, n_q_heads, n_kv_heads, eps))
    heads = out.unflatten(1, (n_heads, head_dim))  # [M, heads, D]
    return heads[:, :n_q_heads], heads[:, n_q_heads:n_q_heads + n_kv_heads], heads[:, n_q_heads + n_kv_heads:]
