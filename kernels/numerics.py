"""Floating-point helpers shared by kernels and references: ulp distances, IEEE division by a constant,
IEEE reciprocals."""
import torch

_BITS = {torch.float16: (torch.int16, 0x7FFF), torch.bfloat16: (torch.int16, 0x7FFF),
         torch.float32: (torch.int32, 0x7FFFFFFF)}


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise count of representable values between a and b (same float dtype), as int64.

    Adjacent floats are 1 apart, equal ones (and +0 / -0) 0 apart: the bit patterns are mapped onto
    integers that increase with the float value.
    """
    int_dtype, magnitude = _BITS[a.dtype]

    def ordered(t: torch.Tensor) -> torch.Tensor:
        bits = t.contiguous().view(int_dtype).long()
        return torch.where(bits < 0, -(bits & magnitude), bits)

    return (ordered(a) - ordered(b)).abs()


def fp16_rounding_ratio(out: torch.Tensor, ref32: torch.Tensor, ref16: torch.Tensor,
                        slack: torch.Tensor | None = None) -> float:
    """max over elements of |out - ref32| / (2 |ref16 - ref32| + one fp16 ulp of max |ref32| + slack).

    ref32 is an fp32 reference and ref16 the same reference rounded as the model's dtype would: a
    kernel is "within fp16 rounding" of the reference when this is <= 1, i.e. it misses by at most
    twice the reference's own rounding error plus one ulp of the largest output. `slack` (shaped like
    out) adds what the kernel's arithmetic may lose before that rounding, where it is not fp32's.
    """
    err = (out.float() - ref32).abs()
    allowed = 2 * (ref16.float() - ref32).abs() + 2.0 ** -10 * ref32.abs().max()
    if slack is not None:
        allowed = allowed + slack.float()
    return (err / allowed.clamp_min(torch.finfo(torch.float32).tiny)).max().item()


def ieee_div(t: torch.Tensor, divisor: float) -> torch.Tensor:
    """t / divisor with IEEE division on every device. PyTorch's CUDA `tensor / python_scalar`
    multiplies by the rounded reciprocal instead, which moves some quotients by an ulp (and so the
    quantization scales the kernels, using div_rn, must match)."""
    return t / torch.full((), divisor, dtype=t.dtype, device=t.device)



def ieee_reciprocal(t: torch.Tensor) -> torch.Tensor:
    """1 / t, correctly rounded, on every device (a tensor numerator: `1 / t` with a Python scalar is PyTorch's
    own reciprocal kernel, not promised to be IEEE's)."""
    return torch.ones((), dtype=t.dtype, device=t.device) / t
