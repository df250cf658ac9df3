"""Tolerances from error analysis, for float32 results compared with float32 results made elsewhere.

Two float32 evaluations of the same function (ours here, upstream's golden recorded on another CPU, or a
fused kernel and the plain path) are two roundings of one exact value. How far each lands from it depends on
the summation order the CPU's kernels chose (oneDNN blocks reductions per ISA: AVX2, AVX-512, AMX), not on
which is "right". So neither is compared with the other under a fixed atol that only the recording CPU meets:
the exact value is computed in float64, and each float32 result must be about as close to it as the other.
"""
from __future__ import annotations

import numpy as np
import torch

# Reordering a reduction changes its rounding error by at most the ratio of the summation-tree depths of the
# two orders (bounded by about 2 for the blockings oneDNN uses); a factor 2 on top covers the different error
# of each intermediate stage feeding the next. Planted bugs (a dropped bias, a wrong stride, fp16 anywhere)
# move results by orders of magnitude more.
ORDER_FACTOR = 4
ULPS = 4  # the final rounding of each result, in float32 ulps of the largest exact value


def _f64(x) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).double()


def max_error(result, exact) -> float:
    return (_f64(result) - _f64(exact)).abs().max().item()


def assert_as_accurate(result, reference, exact, factor: float = ORDER_FACTOR, what: str = "") -> None:
    """`result` is no farther from `exact` than `factor` times `reference` is, plus ULPS float32 ulps."""
    result, reference, exact = _f64(result), _f64(reference), _f64(exact)
    assert result.shape == reference.shape == exact.shape, (what, result.shape, reference.shape, exact.shape)
    ulps = ULPS * torch.finfo(torch.float32).eps * exact.abs().max().item()
    error, reference_error = max_error(result, exact), max_error(reference, exact)
    assert error <= factor * reference_error + ulps, (
        f"{what}: error {error:.3g} vs float64, the other float32 path's {reference_error:.3g} "
        f"(allowed {factor} x that + {ulps:.3g})")


def assert_same_rounding(ours, golden, exact, what: str = "") -> None:
    """Ours and a golden recorded elsewhere are equally good float32 roundings of the float64 `exact`."""
    assert_as_accurate(golden, ours, exact, what=f"{what} (golden)")
    assert_as_accurate(ours, golden, exact, what=f"{what} (ours)")


def float64_codec(codec):
    """A float64 copy of an `AudioCodec` (its code vectors tabulated again in float64): the exact values."""
    import copy

    exact = copy.deepcopy(codec).double()
    exact.quantizer.tabulate()
    return exact
