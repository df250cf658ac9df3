"""W8A8 int8 numerics in plain PyTorch: the contract the Triton path (`kernels/int8.py`) matches bit for bit.

- int8 codes in [-127, 127] with one fp32 scale = amax / 127 per row: a token for activations (dynamic, per
  call), an output channel for weights (once, at conversion);
- codes = clamp(round_half_even(v / scale), -127, 127), IEEE fp32 divisions (a zero row: scale 0, codes 0);
- activations are first divided by the smoothing factors (fp32 IEEE division);
- y = int32 sum of code products (exact), as fp32, * s_x[:, None] * s_w[None, :], + bias in fp32, rounded
  once to the output dtype.
"""
import torch
import torch.nn.functional as F

from kernels.numerics import ieee_div

INT8_MAX = 127


def quantize_rows_int8_ref(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 codes [R, K] and fp32 scales [R] of each row of a 2-D fp32 tensor."""
    scales = ieee_div(t.abs().amax(dim=1), INT8_MAX)  # [R]
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    return torch.round(t / safe[:, None]).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8), scales


def int8_matmul_ref(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Exact a [M, K] int8 @ w [N, K]^T -> int32 [M, N]."""
    if not a.is_cuda:
        return torch._int_mm(a, w.t())
    if a.shape[1] % 8 or w.shape[0] % 8:  # cuBLAS int8 shapes; fp64 is exact here (|sum| < 2^53)
        return (a.double() @ w.double().t()).to(torch.int32)
    pad = max(0, 17 - a.shape[0])  # torch._int_mm on CUDA needs more than 16 rows
    return torch._int_mm(F.pad(a, (0, 0, 0, pad)), w.t())[: a.shape[0]]


def int8_linear_ref(x: torch.Tensor, smooth: torch.Tensor, qweight: torch.Tensor, wscales: torch.Tensor,
                    bias: torch.Tensor | None) -> torch.Tensor:
    """The W8A8 int8 linear of x [..., K]: [..., N] in x's dtype."""
    codes, scales = quantize_rows_int8_ref(x.reshape(-1, x.shape[-1]).float() / smooth)  # [M, K], [M]
    return int8_rows_linear_ref(codes, scales, qweight, wscales, bias, x.dtype).reshape(*x.shape[:-1], -1)


def int8_rows_linear_ref(codes: torch.Tensor, scales: torch.Tensor, qweight: torch.Tensor, wscales: torch.Tensor,
                         bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """[M, N] in dtype from activation codes [M, K] and their scales [M]."""
    y = int8_matmul_ref(codes, qweight).float() * scales[:, None] * wscales  # [M, N]
    if bias is not None:
        y += bias.float()
    return y.to(dtype)
