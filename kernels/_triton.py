"""Triton, or a stand-in that lets the plain-PyTorch references import where Triton is absent.

Also the fp32 math the kernels share: CUDA's libm `expf`/`logf`/`rsqrtf`, which PyTorch's CUDA
kernels call. Triton's `tl.exp` is `ex2.approx` on a rescaled argument, which would put fp16
results one ulp away from PyTorch's now and then (for the same reason kernels divide with
`tl.math.div_rn`, not `/`).
"""
import os

try:
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

    HAS_TRITON = True
except ImportError:  # Windows or CPU-only installs: the *_ref functions must still import

    class _Stub:
        constexpr = None

        @staticmethod
        def jit(fn):
            return fn

    triton = tl = libdevice = _Stub()
    HAS_TRITON = False

# The interpreter (numpy, CPU tensors allowed) is chosen when a kernel is decorated, from this variable.
INTERPRET = HAS_TRITON and os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")
_INTERPRET = tl.constexpr(INTERPRET) if HAS_TRITON else None


@triton.jit
def exp_f32(x):
    if _INTERPRET:  # the interpreter has no libdevice; its numpy exp is accurate too
        return tl.exp(x)
    else:
        return libdevice.exp(x)


@triton.jit
def log_f32(x):
    if _INTERPRET:
        return tl.log(x)
    else:
        return libdevice.log(x)


@triton.jit
def rsqrt_f32(x):
    if _INTERPRET:
        return tl.rsqrt(x)
    else:
        return libdevice.rsqrt(x)


@triton.jit
def round_half_even(v):
    """fp32 v rounded to an integer, ties to even (as torch.round), for |v| < 2**22."""
    if _INTERPRET:  # no libdevice here: adding 1.5 * 2**23 leaves no fraction bits (exact for |v| < 2**22)
        return (v + 12582912.0) - 12582912.0
    else:
        return libdevice.rint(v)


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(row tile, column tile) of GEMM program `pid`, ordered in bands of GROUP_M row tiles so that neighbouring
    programs share weight tiles in L2."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    band = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = (pid // band) * GROUP_M
    band_m = min(tiles_m - first_m, GROUP_M)
    return first_m + (pid % band) % band_m, (pid % band) // band_m
