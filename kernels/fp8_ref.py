"""W8A8 FP8 numerics in plain PyTorch: the contract the GPU path (`kernels/fp8.py`) is checked against.

- e4m3 (torch.float8_e4m3fn, max 448) codes with one fp32 scale = amax / 448 per row (IEEE division): a
  token for activations (dynamic, per call), an output channel for weights (once, at conversion);
- codes = e4m3(clamp(v * inv_scale, -448, 448)) with inv_scale = 1 / scale (IEEE, once per row) and
  round-to-nearest-even; a row whose scale is not a normal fp32 (amax < 448 * 2**-126, ~5e-36; 0 for a
  zero row) takes inv_scale 1, so its codes are 0 and 1 / scale cannot overflow;
- activations are first multiplied by inv_smooth = 1 / smooth (fp32, IEEE, made once where the layer is
  built or loaded: `engine.quant.W8A8FP8Linear`);
- y = (codes_x @ codes_w^T) * s_x[:, None] * s_w[None, :] in fp32 (each e4m3 product is exact), plus
  the optional low-rank branch (x_s @ L1) @ L2 and the bias, rounded once to the output dtype.

No division per element: a kernel multiplies twice where dividing would run two IEEE division routines.
What that changes against dividing (x / smooth, then / scale): with u = 2**-24 (fp32's unit roundoff) and
Q = the exact (x / smooth) / (amax / 448), the divided quotient passes 4 roundings (x / smooth, the amax
element's, the scale, the quotient), so it lies within 4u |Q| of Q; the multiplied one 7 (1 / smooth,
x * that, the amax element's two, the scale, 1 / scale, the product), within 7u |Q|. e4m3 values, and so
the midpoints where its rounding turns, lie at least 2**-4 of their size apart (3 mantissa bits), so the
two codes differ only where a midpoint lies within 7u |Q| (~4e-7 |Q|) of Q, a tie, and then by one e4m3
step; the scales differ by at most 5u relative. (Clamping adds no difference: 448 is an e4m3 value and
the midpoints around it are 432 and 464.) Ties are rare: 15 codes of 25M random elements with outliers
moved, each within 2.6u |Q| of its midpoint. tests/kernels/test_fp8.py checks all this; the kernels
match this contract bit for bit, so no kernel test's tolerance moves.

FP8 tensor cores do not sum in fp32. Measured on an H200 (`python -m tools.kernels.fp8_accumulation`):
cuBLAS adds each run of 128 products (4 MMA steps of 32) in the MMA's own accumulator, which keeps
only `kernels.fp8.accumulator_bits` bits below the leading one of the largest value it adds (a product
2**-14 of it is dropped), and adds the runs in fp32; with `use_fast_accum` it never promotes. So a
kernel is judged against the exact sum of its quantized operands, with `fp8_sum_and_bound`'s bound
added to the output-rounding allowance (`fp8_output_ratio`).
"""
import math

import torch

from kernels.numerics import fp16_rounding_ratio, ieee_div, ieee_reciprocal

FP8_MMA_K = 32  # products one FP8 MMA step adds into its accumulator
FP8_PROMOTION_K = 128  # products summed in that accumulator before cuBLAS adds them to an fp32 sum
FP8_BOUND_LAMBDA = 8.0  # Hoeffding: one output passes its bound by chance with probability < 2 exp(-32) ~ 3e-14

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0
SMALLEST_SCALE = torch.finfo(torch.float32).tiny  # 2**-126: below it a row's codes are 0 (1 / scale would overflow)


def quantize_rows_fp8_ref(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes [R, K] and fp32 scales [R] of each row of a 2-D tensor (computed in fp32)."""
    t = t.float()
    scales = ieee_div(t.abs().amax(dim=1), FP8_MAX)  # [R]
    inv_scales = ieee_reciprocal(torch.where(scales >= SMALLEST_SCALE, scales, torch.ones_like(scales)))  # [R]
    return (t * inv_scales[:, None]).clamp_(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scales


def smoothed_rows(x: torch.Tensor, inv_smooth: torch.Tensor) -> torch.Tensor:
    """x [..., K] as fp32 rows [M, K], multiplied by the smoothing factors' reciprocals inv_smooth [K]."""
    return x.reshape(-1, x.shape[-1]).float() * inv_smooth


def quantize_act_fp8_ref(x: torch.Tensor, inv_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes [M, K] and fp32 scales [M] of x [M, K] * inv_smooth: what `kernels.fp8.quantize_act_fp8` makes."""
    return quantize_rows_fp8_ref(smoothed_rows(x, inv_smooth))


def fp8_linear_ref(x: torch.Tensor, layer) -> torch.Tensor:
    """The W8A8 FP8 linear as the contract defines it, in fp32, returned in x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        [..., K] activations.
    layer
        Anything with the buffers of `engine.quant.W8A8FP8Linear`: `inv_smooth` [K] fp32, `qweight`
        [N, K] e4m3, `wscales` [N] fp32, `lora_down` [K, R] and `lora_up` [N, R] (or None), `bias` [N] or None.
    """
    xs = smoothed_rows(x, layer.inv_smooth)  # [M, K]
    codes, scales = quantize_rows_fp8_ref(xs)
    y = (codes.float() @ layer.qweight.float().t()) * scales[:, None] * layer.wscales[None, :]  # [M, N]
    if layer.lora_down is not None:
        y += (xs @ layer.lora_down.float()) @ layer.lora_up.float().t()
    if layer.bias is not None:
        y += layer.bias.float()
    return y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])


def fp8_sum_and_bound(codes: torch.Tensor, qweight: torch.Tensor,
                      acc_bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact codes @ qweight^T and, per output, how far FP8 tensor cores may land from it, both
    float64 [M, N] before the scales.

    Each MMA step aligns its 32 products and the running sum of its run to the largest magnitude it
    sees, at most mag = |run so far| + sum |products of the step|, and truncates each of those 33
    addends by less than 2**-acc_bits * mag. Truncating toward zero, each error has the sign opposite
    to its addend's: independent and symmetric for the random operands the checks draw, so by Hoeffding the
    sum of all of them stays within LAMBDA * 2**-acc_bits * sqrt(33 * sum over steps of mag^2); the fp32 sums
    of the runs add at most one fp32 rounding of sum |products| per run.
    """
    a, w = codes.double(), qweight.double()  # [M, K], [N, K]; e4m3 values and their products are exact here
    k = a.shape[1]
    exact = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float64, device=a.device)
    run, squares, total_abs = torch.zeros_like(exact), torch.zeros_like(exact), torch.zeros_like(exact)
    for k0 in range(0, k, FP8_MMA_K):
        if k0 % FP8_PROMOTION_K == 0:
            run.zero_()  # promoted: the MMA accumulator starts again
        step_a, step_w = a[:, k0:k0 + FP8_MMA_K], w[:, k0:k0 + FP8_MMA_K]
        step_abs = step_a.abs() @ step_w.abs().t()  # [M, N]
        squares += (run.abs() + step_abs) ** 2
        step = step_a @ step_w.t()
        run += step
        exact += step
        total_abs += step_abs
    bound = FP8_BOUND_LAMBDA * 2.0 ** -acc_bits * ((FP8_MMA_K + 1) * squares).sqrt()
    runs = math.ceil(k / FP8_PROMOTION_K)
    return exact, bound + runs * torch.finfo(torch.float32).eps * total_abs


def fp8_output_ratio(y: torch.Tensor, x: torch.Tensor, layer, acc_bits: int) -> float:
    """`fp16_rounding_ratio` of a W8A8 FP8 linear's output y against the contract in float64, with the
    accumulation bound of FP8 tensor cores added to the allowance (<= 1: as accurate as they can be).
    x and layer as for `fp8_linear_ref`; acc_bits from `kernels.fp8.accumulator_bits` on y's device."""
    xs = smoothed_rows(x, layer.inv_smooth)  # [M, K]
    codes, scales = quantize_rows_fp8_ref(xs)
    exact, bound = fp8_sum_and_bound(codes, layer.qweight, acc_bits)
    outer = scales.double()[:, None] * layer.wscales.double()[None, :]  # [M, N]
    exact, bound = exact * outer, bound * outer
    if layer.lora_down is not None:
        exact += (xs.double() @ layer.lora_down.double()) @ layer.lora_up.double().t()
    if layer.bias is not None:
        exact += layer.bias.double()
    return fp16_rounding_ratio(y.reshape(exact.shape), exact.float(), exact.to(x.dtype), slack=bound)
