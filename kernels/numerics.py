"""How far apart two floating-point tensors are, in units in the last place."""
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
