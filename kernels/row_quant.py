"""Per-row symmetric quantization, the pieces of the int8 (`kernels/int8.py`) and e4m3 (`kernels/fp8.py`) activation
quantizers. int8's divides: x / smooth, scale = amax / QMAX by IEEE division (an all-zero row: scale 0, codes 0),
each value divided by the scale and clamped to +-QMAX (`smoothed`, `row_scale`, `clamped_quotient`). e4m3's
divides nothing per element (`kernels/fp8_ref.py`): x * (1 / smooth), the same scale, each value times 1 / scale
(one IEEE division per row) and clamped (`smoothed_by_reciprocals`, `row_scale_reciprocal`, `clamped_product`).
Each caller then rounds to its own grid and stores its codes."""
from kernels._triton import tl, triton


@triton.jit
def smoothed(x, smooth_ptr, cols, col_ok):
    """x / smooth[cols] in fp32 (IEEE division); x is 0 where not col_ok, and so is the result."""
    return tl.math.div_rn(x, tl.load(smooth_ptr + cols, mask=col_ok, other=1.0))


@triton.jit
def row_scale(amax, QMAX: tl.constexpr):
    """(scale, divisor), both [1] fp32: amax / QMAX, and the scale or 1 where it is 0 (codes 0 for a zero row)."""
    scale = tl.math.div_rn(tl.full((1,), 0.0, tl.float32) + amax, tl.full((1,), QMAX, tl.float32))
    return scale, tl.where(scale > 0, scale, 1.0)


@triton.jit
def clamped_quotient(xs, divisor, QMAX: tl.constexpr):
    """xs / divisor (IEEE) clamped to [-QMAX, QMAX], before the caller's rounding to its grid."""
    return tl.minimum(tl.maximum(tl.math.div_rn(xs, divisor), -QMAX), QMAX)


@triton.jit
def smoothed_by_reciprocals(x, inv_smooth_ptr, cols, col_ok):
    """x * inv_smooth[cols] in fp32 (one rounding); x is 0 where not col_ok, and so is the result."""
    return x * tl.load(inv_smooth_ptr + cols, mask=col_ok, other=1.0)


@triton.jit
def row_scale_reciprocal(amax, QMAX: tl.constexpr, SMALLEST_SCALE: tl.constexpr):
    """(scale, inv_scale), both [1] fp32: amax / QMAX and 1 / scale (IEEE divisions), inv_scale 1 where the scale
    is below SMALLEST_SCALE (a zero or ~0 row: codes 0, and 1 / scale cannot overflow)."""
    scale = tl.math.div_rn(tl.full((1,), 0.0, tl.float32) + amax, tl.full((1,), QMAX, tl.float32))
    return scale, tl.math.div_rn(tl.full((1,), 1.0, tl.float32), tl.where(scale >= SMALLEST_SCALE, scale, 1.0))


@triton.jit
def clamped_product(xs, inv_scale, QMAX: tl.constexpr):
    """xs * inv_scale clamped to [-QMAX, QMAX], before the caller's rounding to its grid."""
    return tl.minimum(tl.maximum(xs * inv_scale, -QMAX), QMAX)
