"""W8A8 FP8 numerics in plain PyTorch: the contract the GPU path (`kernels/fp8.py`) is checked against.

- e4m3 (torch.float8_e4m3fn, max 448) codes with one fp32 scale = amax / 448 per row: a token for
  activations (dynamic, per call), an output channel for weights (once, at conversion);
- codes = e4m3(clamp(v / scale, -448, 448)), IEEE fp32 division and round-to-nearest-even (a zero
  row gets scale 0 and codes 0);
- activations are first divided by the smoothing factors (fp32 IEEE division);
- y = (codes_x @ codes_w^T) * s_x[:, None] * s_w[None, :] in fp32 (each e4m3 product is exact), plus
  the optional low-rank branch (x_s @ L1) @ L2 and the bias, rounded once to the output dtype.
"""
import torch

from kernels.numerics import ieee_div

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0


def quantize_rows_fp8_ref(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes [R, K] and fp32 scales [R] of each row of a 2-D tensor (computed in fp32)."""
    t = t.float()
    scales = ieee_div(t.abs().amax(dim=1), FP8_MAX)  # [R]
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    return (t / safe[:, None]).clamp_(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scales


def fp8_linear_ref(x: torch.Tensor, layer) -> torch.Tensor:
    """The W8A8 FP8 linear as the contract defines it, in fp32, returned in x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        [..., K] activations.
    layer
        Anything with the buffers of `engine.quant.W8A8FP8Linear`: `smooth` [K] fp32, `qweight`
        [N, K] e4m3, `wscales` [N] fp32, `lora_down` [K, R] and `lora_up` [N, R] (or None), `bias` [N] or None.
    """
    xs = x.reshape(-1, x.shape[-1]).float() / layer.smooth  # [M, K]
    codes, scales = quantize_rows_fp8_ref(xs)
    y = (codes.float() @ layer.qweight.float().t()) * scales[:, None] * layer.wscales[None, :]  # [M, N]
    if layer.lora_down is not None:
        y += (xs @ layer.lora_down.float()) @ layer.lora_up.float().t()
    if layer.bias is not None:
        y += layer.bias.float()
    return y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
