"""W4A4 in Triton: the fused activation quantizer and the W4A4 GEMM through 8-bit `tl.dot`.

This runs W4A4 where INT4 tensor cores are missing (sm_90, sm_100, sm_120: only when VOICEDESK_REALTIME=w4a4
asks, since realtime mode takes FP8 there) and is the fallback wherever Triton runs. The
GEMM takes its INT4 codes one per byte, so both operands go from global to shared memory untouched
and into the tensor cores (wgmma on Hopper):
- "e4m3" containers on sm_89+: codes in [-8, 7] are exact FP8 e4m3 values; every partial sum of a
  group's 64 products is an integer below 2**13, which the FP8 MMA's fp32 accumulator holds exactly
  (`tools/kernels/check_realtime_gpu.py` checks the sums on the GPU), and it hands back fp32, ready to scale;
- "int8" containers elsewhere: int8 MMA, int32 sums, turned into fp32 by an add and a subtract rather
  than by the int-to-float instruction, which runs at a fraction of the FMA rate.
The quantizer writes either layout, or the packed bytes the CUDA INT4 GEMM reads. Numerics follow
`kernels/w4a4_ref.py` exactly: same codes, same scales, same integer group sums; only the fp32
summation order and the fp16 low-rank operands differ, which stays within fp16 rounding of the output.

Launch configurations are fixed per shape (no autotuning), so a first call inside a CUDA graph
capture is as safe as any other.
"""
import functools

import torch

from kernels import _launch
from kernels._triton import grouped_tile, round_half_even, tl, triton
from kernels.fp8 import FP8_TENSOR_CORES
from kernels.w4a4_ref import GROUP, QuantizedAct, unpack_int4

RANKS = (16, 32, 64, 128)  # tl.dot needs a power of two >= 16 for the low-rank dimension
LAYOUTS = {"packed": torch.int8, "int8": torch.int8, "e4m3": torch.float8_e4m3fn}  # code storage -> dtype
QUANT_ROWS = 16  # rows per quantizer program (tl.dot's minimum M for the down-projection)
QUANT_GROUPS = 4  # 64-groups per quantizing program
DOWN_BLOCK_K = 128  # K step of the down-projection programs (256 would need 255 registers)


@triton.jit
def _codes(v, scale):
    """INT4 codes of v / scale (scale broadcast to v's shape by the caller): integer-valued fp32 in [QMIN, QMAX]."""
    q = round_half_even(tl.math.div_rn(v, scale))
    return tl.minimum(tl.maximum(q, -8.0), 7.0)


@triton.jit
def _exact_to_float(i):
    """int32 |i| < 2**22 as fp32: i lands in the mantissa of 1.5 * 2**23 (bits 0x4B400000), which is then
    subtracted; two full-rate ALU ops instead of the quarter-rate I2F conversion."""
    return (i + 0x4B400000).to(tl.float32, bitcast=True) - 12582912.0


@triton.jit
def _project_down(x_ptr, smooth_ptr, down_ptr, lowrank_ptr, rows, row_ok, K, stride_xm,
                  RANK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """lowrank[rows] = (x[rows] / smooth) @ lora_down, over all of K."""
    ranks = tl.arange(0, RANK)
    ks = tl.arange(0, BLOCK_K)
    lowrank = tl.zeros((BLOCK_M, RANK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        x = tl.load(x_ptr + rows[:, None] * stride_xm + k[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        xs = tl.math.div_rn(x.to(tl.float32), tl.load(smooth_ptr + k, mask=k_ok, other=1.0)[None, :])  # [BM, BK]
        down = tl.load(down_ptr + k[:, None] * RANK + ranks[None, :], mask=k_ok[:, None], other=0.0)  # [BK, R]
        lowrank = tl.dot(xs.to(down.dtype), down, lowrank)
    tl.store(lowrank_ptr + rows[:, None] * RANK + ranks[None, :], lowrank, mask=row_ok[:, None])


@triton.jit
def _quantize_groups(x_ptr, smooth_ptr, codes_ptr, scales_ptr, rows, row_ok, first_group, K, stride_xm,
                     PACK: tl.constexpr, GROUPS: tl.constexpr):
    """Codes and scales of GROUPS 64-groups (from first_group on) of x[rows] / smooth."""
    HALF: tl.constexpr = 32  # a group is handled as its two 32-wide halves: the packed bytes pair them up
    groups = K // 64
    g = first_group + tl.arange(0, GROUPS)  # [G]
    g_ok = g < groups
    j = tl.arange(0, HALF)
    k_lo = g[:, None] * 64 + j[None, :]  # [G, 32]
    k_hi = k_lo + HALF
    ok = row_ok[:, None, None] & g_ok[None, :, None]  # [BM, G, 1]
    x_row = x_ptr + rows[:, None, None] * stride_xm
    x_lo = tl.load(x_row + k_lo[None, :, :], mask=ok, other=0.0).to(tl.float32)  # [BM, G, 32]
    x_hi = tl.load(x_row + k_hi[None, :, :], mask=ok, other=0.0).to(tl.float32)
    x_lo = tl.math.div_rn(x_lo, tl.load(smooth_ptr + k_lo, mask=g_ok[:, None], other=1.0)[None, :, :])
    x_hi = tl.math.div_rn(x_hi, tl.load(smooth_ptr + k_hi, mask=g_ok[:, None], other=1.0)[None, :, :])
    amax = tl.maximum(tl.max(tl.abs(x_lo), axis=2), tl.max(tl.abs(x_hi), axis=2))  # [BM, G]
    scale = tl.math.div_rn(amax, tl.full(amax.shape, 7.0, tl.float32))  # amax / QMAX
    safe = tl.where(scale > 0, scale, 1.0)[:, :, None]  # an all-zero group gets codes 0
    q_lo = _codes(x_lo, safe)  # [BM, G, 32]
    q_hi = _codes(x_hi, safe)
    if PACK:  # byte g*32 + j: element g*64 + j in the low nibble, g*64 + 32 + j in the high one
        packed = (q_lo.to(tl.int32) & 0xF) | (q_hi.to(tl.int32) << 4)  # in [-128, 127]
        byte = g[:, None] * HALF + j[None, :]  # [G, 32]
        tl.store(codes_ptr + rows[:, None, None] * (K // 2) + byte[None, :, :], packed.to(tl.int8), mask=ok)
    else:  # int8 or e4m3: both hold the integers -8..7 exactly
        code_row = codes_ptr + rows[:, None, None] * K
        tl.store(code_row + k_lo[None, :, :], q_lo.to(codes_ptr.dtype.element_ty), mask=ok)
        tl.store(code_row + k_hi[None, :, :], q_hi.to(codes_ptr.dtype.element_ty), mask=ok)
    tl.store(scales_ptr + rows[:, None] * groups + g[None, :], scale, mask=row_ok[:, None] & g_ok[None, :])


@triton.jit
def _quantize_act_kernel(x_ptr, smooth_ptr, down_ptr, codes_ptr, scales_ptr, lowrank_ptr,
                         M, K, stride_xm,
                         RANK: tl.constexpr, PACK: tl.constexpr, BLOCK_M: tl.constexpr, GROUPS: tl.constexpr,
                         DOWN_BLOCK_K: tl.constexpr):
    # Axis 1 splits each row block's work: program 0 runs the down-projection over all of K (the
    # longest job, so it is scheduled first), programs 1.. quantize GROUPS groups each, in parallel.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    part = tl.program_id(1)
    if part == 0:
        _project_down(x_ptr, smooth_ptr, down_ptr, lowrank_ptr, rows, row_ok, K, stride_xm,
                      RANK, BLOCK_M, DOWN_BLOCK_K)
    else:
        _quantize_groups(x_ptr, smooth_ptr, codes_ptr, scales_ptr, rows, row_ok, (part - 1) * GROUPS, K,
                         stride_xm, PACK, GROUPS)


@triton.jit
def _w4a4_gemm_kernel(a_ptr, sa_ptr, w_ptr, sw_ptr, lowrank_ptr, up_ptr, bias_ptr, residual_ptr, out_ptr, sums_ptr,
                      M, N, K,
                      RANK: tl.constexpr, INT8: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                      WRITE_SUMS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    out_ok = row_ok[:, None] & col_ok[None, :]
    # Rows and columns past the edge read row / column 0 instead (never stored): the K loop has no masks.
    a_rows = tl.where(row_ok, rows, 0)
    w_cols = tl.where(col_ok, cols, 0)
    groups = K // 64
    ks = tl.arange(0, 64)  # one BLOCK_K step is one scale group
    a_ptrs = a_ptr + a_rows[:, None] * K + ks[None, :]  # [BM, 64] codes
    w_ptrs = w_ptr + w_cols[None, :] * K + ks[:, None]  # [64, BN], K-major as 8-bit MMA wants it
    sa_ptrs = sa_ptr + a_rows * groups
    sw_ptrs = sw_ptr + w_cols * groups
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for g in range(groups):
        sa = tl.load(sa_ptrs)  # loaded before the MMA is issued, so their latency hides behind it
        sw = tl.load(sw_ptrs)
        if INT8:
            dot = _exact_to_float(tl.dot(tl.load(a_ptrs), tl.load(w_ptrs), out_dtype=tl.int32))  # [BM, BN]
        else:
            dot = tl.dot(tl.load(a_ptrs), tl.load(w_ptrs), out_dtype=tl.float32)  # integers, exact
        if WRITE_SUMS:
            tl.store(sums_ptr + (rows[:, None] * N + cols[None, :]) * groups + g, dot.to(tl.int32), mask=out_ok)
        acc += dot * sa[:, None] * sw[None, :]
        a_ptrs += 64
        w_ptrs += 64
        sa_ptrs += 1
        sw_ptrs += 1

    ranks = tl.arange(0, RANK)
    lowrank = tl.load(lowrank_ptr + a_rows[:, None] * RANK + ranks[None, :])  # [BM, R] fp32
    up = tl.load(up_ptr + w_cols[None, :] * RANK + ranks[:, None])  # [R, BN]
    acc = tl.dot(lowrank.to(up.dtype), up, acc)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + w_cols).to(tl.float32)[None, :]
    if HAS_RESIDUAL:
        acc += tl.load(residual_ptr + rows[:, None] * N + cols[None, :], mask=out_ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=out_ok)


def _check_rank(lora: torch.Tensor) -> int:
    rank = lora.shape[1]
    if rank not in RANKS:
        raise ValueError(f"the Triton W4A4 kernels support low-rank ranks {RANKS}, got {rank}")
    return rank


def layout_for(capability: tuple[int, int]) -> str:
    """The code layout `w4a4_gemm` runs fastest with on a GPU of this compute capability: "e4m3" with FP8
    tensor cores (sm_89+), else "int8"."""
    return "e4m3" if capability >= FP8_TENSOR_CORES else "int8"


def mma_layout(device: torch.device) -> str:
    """`layout_for` this device ("int8" off CUDA: the interpreter)."""
    return layout_for(torch.cuda.get_device_capability(device)) if device.type == "cuda" else "int8"


def weight_codes(qweight: torch.Tensor, layout: str) -> torch.Tensor:
    """Packed INT4 weights [N, K/2] -> one code per byte [N, K] in `layout` ("int8" or "e4m3")."""
    return unpack_int4(qweight).to(LAYOUTS[layout]).contiguous()


def quantize_act(x: torch.Tensor, smooth: torch.Tensor, lora_down: torch.Tensor, layout: str = "int8") -> QuantizedAct:
    """Smooth, quantize and project down in one launch.

    Parameters
    ----------
    x : torch.Tensor
        [M, K] fp16/bf16/fp32 activations, K a multiple of 64, last dimension contiguous.
    smooth : torch.Tensor
        [K] fp32 SVDQuant smoothing factors (x is divided by them).
    lora_down : torch.Tensor
        [K, R] low-rank down projection, R in (16, 32, 64, 128).
    layout : str
        "int8" or "e4m3": one code per element, [M, K], for `w4a4_gemm`; "packed": INT4 bytes
        [M, K/2] for the CUDA INT4 GEMM.

    Returns
    -------
    QuantizedAct
        codes, fp32 scales [M, K/64], fp32 x_smoothed @ lora_down [M, R].
    """
    m, k = x.shape
    device = _launch.device_of(x, smooth, lora_down)
    if k % GROUP:
        raise ValueError(f"K = {k} is not a multiple of {GROUP}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}")
    rank = _check_rank(lora_down)
    _launch.check("x", x, (m, k), _launch.FLOAT_DTYPES)
    _launch.check("smooth", smooth, (k,), (torch.float32,))
    _launch.check("lora_down", lora_down, (k, rank), _launch.FLOAT_DTYPES)
    if not lora_down.is_contiguous():
        raise ValueError("lora_down must be contiguous")
    pack = layout == "packed"
    codes = torch.empty(m, k // 2 if pack else k, dtype=LAYOUTS[layout], device=device)
    scales = torch.empty(m, k // GROUP, dtype=torch.float32, device=device)
    lowrank = torch.empty(m, rank, dtype=torch.float32, device=device)
    grid = (triton.cdiv(m, QUANT_ROWS), 1 + triton.cdiv(k // GROUP, QUANT_GROUPS))
    with _launch.on_device(device):
        _quantize_act_kernel[grid](
            x, smooth, lora_down, codes, scales, lowrank, m, k, x.stride(0),
            RANK=rank, PACK=pack, BLOCK_M=QUANT_ROWS, GROUPS=QUANT_GROUPS, DOWN_BLOCK_K=DOWN_BLOCK_K,
            num_warps=4, enable_fp_fusion=False)
    return QuantizedAct(codes, scales, lowrank)


@functools.cache
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


GEMM_TILES = {  # name -> launch options; sm_90: 8 warps are two warpgroups, each a 64 x 128 wgmma
    "128x128": {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4},
    "64x128": {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 4},
    "interpreter": {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1, "num_stages": 1},  # small numpy work
}


def gemm_tile(m: int, n: int, device: torch.device) -> str:
    """The GEMM's tile for an [m, n] output: 128 x 128 when that fills the GPU, else 64 x 128."""
    if device.type != "cuda":
        return "interpreter"
    return "128x128" if triton.cdiv(m, 128) * triton.cdiv(n, 128) >= _sm_count(device) else "64x128"


def _launch_gemm(act: QuantizedAct, qweight, wscales, lora_up, bias, residual, out, out_dtype, sums, tile):
    m, n, k = act.codes.shape[0], qweight.shape[0], act.scales.shape[1] * GROUP
    device = _launch.device_of(act.codes, act.scales, act.lowrank, qweight, wscales, lora_up)
    rank = _check_rank(lora_up)
    code_dtypes = (torch.int8, torch.float8_e4m3fn)
    for name, t, shape, dtypes in [("act.scales", act.scales, (m, k // GROUP), (torch.float32,)),
                                   ("act.codes", act.codes, (m, k), code_dtypes),
                                   ("act.lowrank", act.lowrank, (m, rank), (torch.float32,)),
                                   ("qweight", qweight, (n, k), (act.codes.dtype,)),
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
        if not residual.is_contiguous():
            raise ValueError("residual must be contiguous")
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    cfg = GEMM_TILES[tile or gemm_tile(m, n, device)]
    grid = (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]),)
    with _launch.on_device(device):
        _w4a4_gemm_kernel[grid](
            act.codes, act.scales, qweight, wscales, act.lowrank, lora_up,
            bias if bias is not None else out, residual if residual is not None else out, out,
            sums if sums is not None else act.scales,
            m, n, k,
            RANK=rank, INT8=act.codes.dtype == torch.int8, HAS_BIAS=bias is not None,
            HAS_RESIDUAL=residual is not None, WRITE_SUMS=sums is not None, GROUP_M=8, **cfg)
    return out


def w4a4_gemm(act: QuantizedAct, qweight: torch.Tensor, wscales: torch.Tensor, lora_up: torch.Tensor,
              bias: torch.Tensor | None = None, residual: torch.Tensor | None = None,
              out: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
              tile: str | None = None) -> torch.Tensor:
    """y = W4A4(act, weight) + act.lowrank @ lora_up^T + bias + residual.

    Parameters
    ----------
    act : QuantizedAct
        From `quantize_act` with layout "int8" or "e4m3" (`mma_layout` picks the faster here).
    qweight : torch.Tensor
        [N, K] weight codes in [-8, 7], one per byte, in act.codes' dtype (`weight_codes`).
    wscales : torch.Tensor
        [N, K/64] fp32 weight scales.
    lora_up : torch.Tensor
        [N, R] low-rank up projection (its dtype is the default output dtype).
    bias, residual : torch.Tensor, optional
        [N] and [M, N], added in fp32 before the single rounding to the output dtype.
    out : torch.Tensor, optional
        [M, N] contiguous output buffer (for CUDA graphs); it may be `residual` itself.
    tile : str, optional
        A key of `GEMM_TILES` to force (benchmarks); by default `gemm_tile` picks one.

    Returns
    -------
    torch.Tensor
        [M, N] in `out_dtype` (default: lora_up's dtype).
    """
    return _launch_gemm(act, qweight, wscales, lora_up, bias, residual, out, out_dtype, None, tile)


def w4a4_gemm_debug(act: QuantizedAct, qweight: torch.Tensor, wscales: torch.Tensor, lora_up: torch.Tensor,
                    bias: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                    tile: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`w4a4_gemm` that also returns the kernel's int32 group sums [M, N, K/64], for exact tests."""
    m, n, groups = act.codes.shape[0], qweight.shape[0], act.scales.shape[1]
    sums = torch.empty(m, n, groups, dtype=torch.int32, device=act.codes.device)
    out = _launch_gemm(act, qweight, wscales, lora_up, bias, None, None, out_dtype, sums, tile)
    return out, sums
