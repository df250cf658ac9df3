"""W4A4 in Triton: the fused activation quantizer and the W4A4 GEMM through int8 `tl.dot`.

This is the sm_90 path (Hopper has no INT4 tensor cores, so the INT4 codes are unpacked to int8 in
registers) and the fallback wherever Triton runs. Numerics follow `kernels/w4a4_ref.py` exactly: same
codes, same scales, same integer group sums; only the fp32 summation order and the fp16 low-rank
operands differ, which stays within fp16 rounding of the output.
"""
import torch

from kernels import _launch
from kernels._triton import _INTERPRET, INTERPRET, libdevice, tl, triton
from kernels.w4a4_ref import GROUP, QuantizedAct

RANKS = (16, 32, 64, 128)  # tl.dot needs a power of two >= 16 for the low-rank dimension


@triton.jit
def _round_half_even(v):
    if _INTERPRET:  # no libdevice here: adding 1.5 * 2**23 leaves no fraction bits (exact for |v| < 2**22)
        return (v + 12582912.0) - 12582912.0
    else:
        return libdevice.rint(v)


@triton.jit
def _codes(v, scale):
    q = _round_half_even(tl.math.div_rn(v, scale[:, None]))
    return tl.minimum(tl.maximum(q, -8.0), 7.0).to(tl.int32)  # the INT4 range [QMIN, QMAX]


@triton.jit
def _quantize_act_kernel(x_ptr, smooth_ptr, down_ptr, packed_ptr, scales_ptr, lowrank_ptr,
                         M, K, stride_xm,
                         RANK: tl.constexpr, BLOCK_M: tl.constexpr):
    HALF: tl.constexpr = 32  # a 64-group is stored as two 32-wide halves sharing bytes
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, HALF)
    ranks = tl.arange(0, RANK)
    groups = K // 64
    lowrank = tl.zeros((BLOCK_M, RANK), dtype=tl.float32)
    for g in range(groups):
        k_lo = g * 64 + cols  # [32]
        k_hi = k_lo + HALF
        x_lo = tl.load(x_ptr + rows[:, None] * stride_xm + k_lo[None, :], mask=row_ok[:, None], other=0.0)
        x_hi = tl.load(x_ptr + rows[:, None] * stride_xm + k_hi[None, :], mask=row_ok[:, None], other=0.0)
        x_lo = tl.math.div_rn(x_lo.to(tl.float32), tl.load(smooth_ptr + k_lo)[None, :])  # [BM, 32]
        x_hi = tl.math.div_rn(x_hi.to(tl.float32), tl.load(smooth_ptr + k_hi)[None, :])
        amax = tl.maximum(tl.max(tl.abs(x_lo), axis=1), tl.max(tl.abs(x_hi), axis=1))  # [BM]
        scale = tl.math.div_rn(amax, tl.full(amax.shape, 7.0, tl.float32))  # amax / QMAX
        safe = tl.where(scale > 0, scale, 1.0)  # an all-zero group gets codes 0
        packed = (_codes(x_lo, safe) & 0xF) | (_codes(x_hi, safe) << 4)  # [BM, 32] in [-128, 127]
        tl.store(packed_ptr + rows[:, None] * (K // 2) + (g * HALF + cols)[None, :], packed.to(tl.int8),
                 mask=row_ok[:, None])
        tl.store(scales_ptr + rows * groups + g, scale, mask=row_ok)
        down_lo = tl.load(down_ptr + k_lo[:, None] * RANK + ranks[None, :])  # [32, R]
        down_hi = tl.load(down_ptr + k_hi[:, None] * RANK + ranks[None, :])
        lowrank = tl.dot(x_lo.to(down_lo.dtype), down_lo, lowrank)
        lowrank = tl.dot(x_hi.to(down_hi.dtype), down_hi, lowrank)
    tl.store(lowrank_ptr + rows[:, None] * RANK + ranks[None, :], lowrank, mask=row_ok[:, None])


def _gemm_configs():
    if INTERPRET:  # one small tile: autotuning would run every config under numpy
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": 1}, num_warps=1)]
    tiles = [(128, 128, 8, 3), (128, 64, 4, 4), (64, 128, 4, 4), (128, 256, 8, 3), (64, 64, 4, 4), (32, 64, 4, 4),
             (16, 64, 4, 4)]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "GROUP_M": 8}, num_warps=w, num_stages=s)
            for bm, bn, w, s in tiles]


@triton.autotune(configs=_gemm_configs(), key=["m_bucket", "N", "K", "RANK"])
@triton.jit
def _w4a4_gemm_kernel(a_ptr, sa_ptr, w_ptr, sw_ptr, lowrank_ptr, up_ptr, bias_ptr, residual_ptr, out_ptr, sums_ptr,
                      M, N, K, m_bucket,  # m_bucket: M rounded up to a power of two, the autotuning key
                      RANK: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                      WRITE_SUMS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    # Tiles ordered in bands of GROUP_M rows so neighbouring programs share weight tiles in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    band = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = (pid // band) * GROUP_M
    band_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % band) % band_m
    pid_n = (pid % band) // band_m

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    out_ok = row_ok[:, None] & col_ok[None, :]
    half_bytes = tl.arange(0, 32)
    groups = K // 64
    a_ptrs = a_ptr + rows[:, None] * (K // 2) + half_bytes[None, :]  # [BM, 32] bytes of one group
    w_ptrs = w_ptr + cols[:, None] * (K // 2) + half_bytes[None, :]  # [BN, 32]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for g in range(groups):
        a = tl.load(a_ptrs, mask=row_ok[:, None], other=0)
        w = tl.load(w_ptrs, mask=col_ok[:, None], other=0)
        # Low nibbles hold elements 0..31 of the group, high nibbles 32..63; shifts sign-extend them.
        dot = tl.dot((a << 4) >> 4, tl.trans((w << 4) >> 4), out_dtype=tl.int32)  # [BM, BN] exact
        dot = tl.dot(a >> 4, tl.trans(w >> 4), dot, out_dtype=tl.int32)
        if WRITE_SUMS:
            tl.store(sums_ptr + (rows[:, None] * N + cols[None, :]) * groups + g, dot, mask=out_ok)
        sa = tl.load(sa_ptr + rows * groups + g, mask=row_ok, other=0.0)
        sw = tl.load(sw_ptr + cols * groups + g, mask=col_ok, other=0.0)
        acc += dot.to(tl.float32) * sa[:, None] * sw[None, :]
        a_ptrs += 32
        w_ptrs += 32

    ranks = tl.arange(0, RANK)
    lowrank = tl.load(lowrank_ptr + rows[:, None] * RANK + ranks[None, :], mask=row_ok[:, None], other=0.0)
    up = tl.load(up_ptr + cols[:, None] * RANK + ranks[None, :], mask=col_ok[:, None], other=0.0)  # [BN, R]
    acc = tl.dot(lowrank.to(up.dtype), tl.trans(up), acc)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_RESIDUAL:
        acc += tl.load(residual_ptr + rows[:, None] * N + cols[None, :], mask=out_ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=out_ok)


def _check_rank(lora: torch.Tensor) -> int:
    rank = lora.shape[1]
    if rank not in RANKS:
        raise ValueError(f"the Triton W4A4 kernels support low-rank ranks {RANKS}, got {rank}")
    return rank


def quantize_act(x: torch.Tensor, smooth: torch.Tensor, lora_down: torch.Tensor) -> QuantizedAct:
    """Smooth, quantize and project down in one pass over x.

    Parameters
    ----------
    x : torch.Tensor
        [M, K] fp16/bf16/fp32 activations, K a multiple of 64, last dimension contiguous.
    smooth : torch.Tensor
        [K] fp32 SVDQuant smoothing factors (x is divided by them).
    lora_down : torch.Tensor
        [K, R] low-rank down projection, R in (16, 32, 64, 128).

    Returns
    -------
    QuantizedAct
        packed int4 codes [M, K/2] int8, fp32 scales [M, K/64], fp32 x_smoothed @ lora_down [M, R].
    """
    m, k = x.shape
    device = _launch.device_of(x, smooth, lora_down)
    if k % GROUP:
        raise ValueError(f"K = {k} is not a multiple of {GROUP}")
    rank = _check_rank(lora_down)
    _launch.check("x", x, (m, k), _launch.FLOAT_DTYPES)
    _launch.check("smooth", smooth, (k,), (torch.float32,))
    _launch.check("lora_down", lora_down, (k, rank), _launch.FLOAT_DTYPES)
    if not lora_down.is_contiguous():
        raise ValueError("lora_down must be contiguous")
    packed = torch.empty(m, k // 2, dtype=torch.int8, device=device)
    scales = torch.empty(m, k // GROUP, dtype=torch.float32, device=device)
    lowrank = torch.empty(m, rank, dtype=torch.float32, device=device)
    block_m = 16  # small row blocks: M/16 programs keep every SM busy at M >= 2k
    with _launch.on_device(device):
        _quantize_act_kernel[(triton.cdiv(m, block_m),)](
            x, smooth, lora_down, packed, scales, lowrank, m, k, x.stride(0),
            RANK=rank, BLOCK_M=block_m, num_warps=4)
    return QuantizedAct(packed, scales, lowrank)


def _launch_gemm(act: QuantizedAct, qweight, wscales, lora_up, bias, residual, out, out_dtype, sums):
    m, kb = act.packed.shape
    n, k = qweight.shape[0], kb * 2
    device = _launch.device_of(act.packed, act.scales, act.lowrank, qweight, wscales, lora_up)
    rank = _check_rank(lora_up)
    for name, t, shape, dtypes in [("act.packed", act.packed, (m, kb), (torch.int8,)),
                                   ("act.scales", act.scales, (m, k // GROUP), (torch.float32,)),
                                   ("act.lowrank", act.lowrank, (m, rank), (torch.float32,)),
                                   ("qweight", qweight, (n, kb), (torch.int8,)),
                                   ("wscales", wscales, (n, k // GROUP), (torch.float32,)),
                                   ("lora_up", lora_up, (n, rank), _launch.FLOAT_DTYPES)]:
        _launch.check(name, t, shape, dtypes)
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    out_dtype = out_dtype or lora_up.dtype
    out = _launch.output("out", out, (m, n), out_dtype, device)
    if bias is not None:
        _launch.check("bias", bias, (n,), _launch.FLOAT_DTYPES)
    if residual is not None:
        _launch.check("residual", residual, (m, n), _launch.FLOAT_DTYPES)
        if not residual.is_contiguous() or residual.data_ptr() == out.data_ptr():
            raise ValueError("residual must be contiguous and must not be `out` (autotuning reruns the kernel)")
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    with _launch.on_device(device):
        _w4a4_gemm_kernel[grid](
            act.packed, act.scales, qweight, wscales, act.lowrank, lora_up,
            bias if bias is not None else out, residual if residual is not None else out, out,
            sums if sums is not None else act.scales,
            m, n, k, triton.next_power_of_2(m),
            RANK=rank, HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None, WRITE_SUMS=sums is not None)
    return out


def w4a4_gemm(act: QuantizedAct, qweight: torch.Tensor, wscales: torch.Tensor, lora_up: torch.Tensor,
              bias: torch.Tensor | None = None, residual: torch.Tensor | None = None,
              out: torch.Tensor | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """y = W4A4(act, weight) + act.lowrank @ lora_up^T + bias + residual.

    Parameters
    ----------
    act : QuantizedAct
        From `quantize_act` (or `kernels.w4a4_ref.quantize_act_lowrank_ref`).
    qweight : torch.Tensor
        [N, K/2] int8 packed INT4 weight codes (group-halves layout).
    wscales : torch.Tensor
        [N, K/64] fp32 weight scales.
    lora_up : torch.Tensor
        [N, R] low-rank up projection (its dtype is the default output dtype).
    bias, residual : torch.Tensor, optional
        [N] and [M, N], added in fp32 before the single rounding to the output dtype.
    out : torch.Tensor, optional
        [M, N] contiguous output buffer (for CUDA graphs); must not alias `residual`.

    Returns
    -------
    torch.Tensor
        [M, N] in `out_dtype` (default: lora_up's dtype).
    """
    return _launch_gemm(act, qweight, wscales, lora_up, bias, residual, out, out_dtype, None)


def w4a4_gemm_debug(act: QuantizedAct, qweight: torch.Tensor, wscales: torch.Tensor, lora_up: torch.Tensor,
                    bias: torch.Tensor | None = None, out_dtype: torch.dtype | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """`w4a4_gemm` that also returns the kernel's int32 group sums [M, N, K/64], for exact tests."""
    m, n, groups = act.packed.shape[0], qweight.shape[0], act.scales.shape[1]
    sums = torch.empty(m, n, groups, dtype=torch.int32, device=act.packed.device)
    out = _launch_gemm(act, qweight, wscales, lora_up, bias, None, None, out_dtype, sums)
    return out, sums
