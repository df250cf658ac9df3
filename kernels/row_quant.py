"""Per-row symmetric quantization, the part the e4m3 (`kernels/fp8.py`) and int8 (`kernels/int8.py`) activation
quantizers share: x / smooth, scale = amax / QMAX by IEEE division (an all-zero row: scale 0, codes 0), each value
divided by the scale and clamped to +-QMAX. Each caller then rounds to its own grid and stores its codes."""
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
