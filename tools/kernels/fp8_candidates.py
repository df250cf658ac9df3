"""Activation quantizers for o_proj's and down_proj's inputs that need no reduction over a whole row, as CANDIDATES
for `tools/kernels/bench_fp8_layer.py` to time (not in the product; each beside the same arithmetic in torch):

- static: one per-tensor scale (a calibration would set it; here amax x margin of the bench's own data) and its
  reciprocal; codes = e4m3(clamp(x * inv_smooth * inv_scale)). Tiled like swiglu_scaled; the GEMM stays unit-scale
  (FP8Product) with that scale as every row's.
- blocks: DeepSeek-V3's 1 x 128 activation blocks (scale = amax / 448 per row and 128 columns, codes = e4m3(x * (1 /
  scale)), IEEE reciprocal, a zero block 0), written M-major [M, K/128] as `torch._scaled_mm` takes them with 128 x
  128 weight blocks (BlockWise1x128 x BlockWise128x128, sm_90): the GEMM applies the scales and writes fp16, so the
  consumer reads a plain tensor. A program holds 1024 columns (8 blocks), so it too runs tiled. o_proj's 128-column
  blocks are its input's heads: the attention kernel could write them from the registers it holds.
SwiGLU variants read an FP8 gate_up product (raw bf16, row and column scales) as `kernels.swiglu.swiglu_scaled`
does and quantize its fp16 output.
"""
import torch

from kernels._triton import _INTERPRET, tl, triton
from kernels.fp8 import FP8Product, FP8Rows, _round_to_e4m3
from kernels.fp8_ref import FP8_DTYPE, FP8_MAX, SMALLEST_SCALE
from kernels.numerics import ieee_div, ieee_reciprocal
from kernels.swiglu import silu_mul

TILE = 1024  # columns per program
GROUP = 128  # columns per activation block


@triton.jit
def _e4m3(v):
    v = tl.minimum(tl.maximum(v, -448.0), 448.0)
    if _INTERPRET:
        v = _round_to_e4m3(v)
    return v.to(tl.float8e4nv)


@triton.jit
def _tile(n_cols, TILE: tl.constexpr):
    cols = tl.program_id(1) * TILE + tl.arange(0, TILE)
    return cols, cols < n_cols


@triton.jit
def _swiglu_tile(raw_ptr, row_scales_ptr, col_scales_ptr, stride_raw, n_cols, row, cols, mask):
    """swiglu_scaled's fp16 output at (row, cols), in fp32 (0 where not mask)."""
    row_scale = tl.load(row_scales_ptr + row)
    gate = tl.load(raw_ptr + row * stride_raw + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(raw_ptr + row * stride_raw + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    gate = (gate * row_scale * tl.load(col_scales_ptr + cols, mask=mask, other=0.0)).to(tl.float16)
    up = (up * row_scale * tl.load(col_scales_ptr + n_cols + cols, mask=mask, other=0.0)).to(tl.float16)
    return silu_mul(gate, up).to(tl.float16).to(tl.float32)


@triton.jit
def _store_static(x, inv_smooth_ptr, inv_scale_ptr, codes_ptr, n_cols, row, cols, mask):
    v = x * tl.load(inv_smooth_ptr + cols, mask=mask, other=1.0) * tl.load(inv_scale_ptr)
    tl.store(codes_ptr + row * n_cols + cols, _e4m3(v), mask=mask)


@triton.jit
def _store_blocks(x, codes_ptr, scales_ptr, n_rows, n_cols, row, cols, mask, TILE: tl.constexpr,
                  GROUP: tl.constexpr, SMALLEST: tl.constexpr):
    """x [TILE] (this program's columns) as TILE / GROUP blocks: their codes, and their scales at
    scales_ptr[block * n_rows + row]."""
    groups: tl.constexpr = TILE // GROUP
    blocks = tl.reshape(x, (groups, GROUP))
    scale = tl.math.div_rn(tl.max(tl.abs(blocks), axis=1), tl.full((groups,), 448.0, tl.float32))  # [groups]
    inv = tl.math.div_rn(tl.full((groups,), 1.0, tl.float32), tl.where(scale >= SMALLEST, scale, 1.0))
    block_ids = tl.program_id(1) * groups + tl.arange(0, groups)
    tl.store(scales_ptr + block_ids * n_rows + row, scale, mask=block_ids * GROUP < n_cols)
    codes = tl.reshape(_e4m3(blocks * inv[:, None]), (TILE,))  # row-major: column order again
    tl.store(codes_ptr + row * n_cols + cols, codes, mask=mask)


@triton.jit
def _swiglu_static_kernel(raw_ptr, row_scales_ptr, col_scales_ptr, inv_smooth_ptr, inv_scale_ptr, codes_ptr,
                          stride_raw, n_cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols, mask = _tile(n_cols, TILE)
    x = _swiglu_tile(raw_ptr, row_scales_ptr, col_scales_ptr, stride_raw, n_cols, row, cols, mask)
    _store_static(x, inv_smooth_ptr, inv_scale_ptr, codes_ptr, n_cols, row, cols, mask)


@triton.jit
def _quantize_static_kernel(x_ptr, inv_smooth_ptr, inv_scale_ptr, codes_ptr, stride_x, n_cols, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols, mask = _tile(n_cols, TILE)
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    _store_static(x, inv_smooth_ptr, inv_scale_ptr, codes_ptr, n_cols, row, cols, mask)


@triton.jit
def _swiglu_blocks_kernel(raw_ptr, row_scales_ptr, col_scales_ptr, codes_ptr, scales_ptr, stride_raw, n_rows, n_cols,
                          TILE: tl.constexpr, GROUP: tl.constexpr, SMALLEST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols, mask = _tile(n_cols, TILE)
    x = _swiglu_tile(raw_ptr, row_scales_ptr, col_scales_ptr, stride_raw, n_cols, row, cols, mask)
    _store_blocks(x, codes_ptr, scales_ptr, n_rows, n_cols, row, cols, mask, TILE, GROUP, SMALLEST)


@triton.jit
def _quantize_blocks_kernel(x_ptr, codes_ptr, scales_ptr, stride_x, n_rows, n_cols, TILE: tl.constexpr,
                            GROUP: tl.constexpr, SMALLEST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols, mask = _tile(n_cols, TILE)
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    _store_blocks(x, codes_ptr, scales_ptr, n_rows, n_cols, row, cols, mask, TILE, GROUP, SMALLEST)


class StaticScale:
    """One per-tensor scale (amax of xs [M, K] / 448, times `margin`, as a calibration would set it), its reciprocal,
    and the scale expanded over the M rows (stride 0) as FP8Rows carries row scales."""

    def __init__(self, xs: torch.Tensor, margin: float = 4.0):
        self.scale = (xs.abs().amax().float() * margin / FP8_MAX).reshape(1)
        self.inv = ieee_reciprocal(self.scale)
        self.rows = self.scale.expand(xs.shape[0])


def _launch(kernel, m: int, n: int, *args, **constants) -> None:
    kernel[(m, triton.cdiv(n, TILE))](*args, TILE=TILE, num_warps=4, enable_fp_fusion=False, **constants)


def swiglu_static(p: FP8Product, inv_smooth: torch.Tensor, scale: StaticScale) -> FP8Rows:
    """down_proj's FP8Rows from the SwiGLU of gate_up's product p, at the static scale."""
    m, n = p.raw.shape[0], p.raw.shape[1] // 2
    codes = torch.empty(m, n, dtype=FP8_DTYPE, device=p.raw.device)
    _launch(_swiglu_static_kernel, m, n, p.raw, p.row_scales, p.col_scales, inv_smooth, scale.inv, codes,
            p.raw.stride(0), n)
    return FP8Rows(codes, scale.rows, torch.Size((m, n)), p.dtype)


def quantize_static(x: torch.Tensor, inv_smooth: torch.Tensor, scale: StaticScale) -> FP8Rows:
    """FP8Rows of x [M, K] at the static scale."""
    m, n = x.shape
    codes = torch.empty(m, n, dtype=FP8_DTYPE, device=x.device)
    _launch(_quantize_static_kernel, m, n, x, inv_smooth, scale.inv, codes, x.stride(0), n)
    return FP8Rows(codes, scale.rows, x.shape, x.dtype)


def static_ref(x: torch.Tensor, inv_smooth: torch.Tensor, scale: StaticScale) -> torch.Tensor:
    """The static codes in torch (x * inv_smooth * inv_scale in fp32, in that order)."""
    return (x.float() * inv_smooth * scale.inv).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def _new_blocks(m: int, n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if n % GROUP:
        raise ValueError(f"{n} columns are not whole blocks of {GROUP}")
    scales = torch.empty(n // GROUP, m, dtype=torch.float32, device=device).t()  # [M, K/128], M-major
    return torch.empty(m, n, dtype=FP8_DTYPE, device=device), scales


def swiglu_blocks(p: FP8Product) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes [M, I] and M-major 1 x 128 block scales [M, I/128] of the SwiGLU of gate_up's product p."""
    m, n = p.raw.shape[0], p.raw.shape[1] // 2
    codes, scales = _new_blocks(m, n, p.raw.device)
    _launch(_swiglu_blocks_kernel, m, n, p.raw, p.row_scales, p.col_scales, codes, scales, p.raw.stride(0), m, n,
            GROUP=GROUP, SMALLEST=SMALLEST_SCALE)
    return codes, scales


def quantize_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes [M, K] and M-major 1 x 128 block scales [M, K/128] of x."""
    m, n = x.shape
    codes, scales = _new_blocks(m, n, x.device)
    _launch(_quantize_blocks_kernel, m, n, x, codes, scales, x.stride(0), m, n, GROUP=GROUP, SMALLEST=SMALLEST_SCALE)
    return codes, scales


def blocks_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 1 x 128 block codes and scales [M, K/128] in torch."""
    m, n = x.shape
    blocks = x.float().reshape(m, n // GROUP, GROUP)
    scales = ieee_div(blocks.abs().amax(dim=2), FP8_MAX)  # [M, K/128]
    inv = ieee_reciprocal(torch.where(scales >= SMALLEST_SCALE, scales, torch.ones_like(scales)))
    codes = (blocks * inv[:, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).reshape(m, n)
    return codes, scales


def block_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] in 128 x 128 blocks: e4m3 codes [N, K] and the scales laid out for `block_gemm`."""
    from tools.kernels.bench_fp8_scaling import quantize_blocks as quantize_weight_blocks
    from tools.kernels.bench_fp8_scaling import weight_block_scales

    codes, scales = quantize_weight_blocks(w, GROUP, GROUP)
    return codes, weight_block_scales(scales)


def block_gemm(codes: torch.Tensor, scales: torch.Tensor, weight: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """y [M, N] fp16 = block-scaled codes @ weight^T, the scales applied inside the GEMM (sm_90's cuBLASLt)."""
    return torch._scaled_mm(codes, weight[0].t(), scale_a=scales, scale_b=weight[1], out_dtype=torch.float16)
