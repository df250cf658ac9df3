"""How exactly this GPU's FP8 GEMM sums its products: `python -m tools.kernels.fp8_accumulation [--m 1024]`.

Every e4m3 x e4m3 product is exact in fp32, so the only error of `torch._scaled_mm` before its output
rounding is how it accumulates. This measures it against float64 sums of the same quantized operands:
1. probes: rows of one big product (256) and K - 1 small ones (2**-6). A true fp32 accumulator keeps
   every small one; an accumulator with fewer mantissa bits drops those added while the big one is in
   its running sum, so the count lost says how many products share an accumulator before it is
   promoted to fp32, and where;
2. at the realtime linears' shapes (inputs of check_realtime_gpu): the error of the fp32 output
   divided by B = sum_k |a_k w_k| (the scale of the sum), as effective mantissa bits, and the check's
   fp16-rounding ratio of the fp16 output, beside the same ratios when the products are summed in
   fp32 (cuBLAS fp32 GEMM of the decoded codes) and with `use_fast_accum=True`; 'bounded' is the
   check's rule (`kernels.fp8_ref.fp8_output_ratio`: fp16 rounding plus the accumulation bound, <= 1).
"""
import argparse
import math
import sys

import torch

from kernels import fp8
from kernels.fp8_ref import FP8_DTYPE, fp8_output_ratio
from kernels.numerics import fp16_rounding_ratio
from tools.kernels.check_realtime_gpu import make_fp8
from tools.kernels.check_w4a4_cuda import SHAPES, make_input

DEVICE = "cuda"
BIG, SMALL = 16.0, 0.125  # e4m3 values: products 256 and 2**-6


def scaled_mm(codes, scales, qweight, wscales, out_dtype, fast=False) -> torch.Tensor:
    return torch._scaled_mm(codes, qweight.t(), scale_a=scales[:, None], scale_b=wscales[None, :],
                            out_dtype=out_dtype, use_fast_accum=fast)


def probe(k: int, positions: list[int], fast: bool) -> list[float]:
    """Small products lost (of k - 1) for a big product at each position, summed by _scaled_mm."""
    a = torch.full((len(positions) + 15, k), SMALL, device=DEVICE)
    for row, pos in enumerate(positions):
        a[row, pos] = BIG
    w = torch.full((16, k), SMALL, device=DEVICE)
    ones_a, ones_w = torch.ones(a.shape[0], device=DEVICE), torch.ones(16, device=DEVICE)
    lost = []
    for row, pos in enumerate(positions):
        wr = w.clone()
        wr[:, pos] = BIG
        y = scaled_mm(a.to(FP8_DTYPE), ones_a, wr.to(FP8_DTYPE), ones_w, torch.float32, fast)[row, 0].item()
        exact = BIG * BIG + (k - 1) * SMALL * SMALL
        lost.append((exact - y) / (SMALL * SMALL))
    return lost


def shape_errors(m: int, k: int, n: int, acc_bits: int) -> dict[str, float]:
    x = make_input(m, k, seed=0)
    layer = make_fp8(k, n, seed=0)
    codes, scales = fp8.quantize_act_fp8(x, layer.inv_smooth)
    a64, w64 = codes.double(), layer.qweight.double()
    outer = scales.double()[:, None] * layer.wscales.double()[None, :]  # [M, N]
    exact = (a64 @ w64.t()) * outer
    bound = (a64.abs() @ w64.abs().t()) * outer  # B: sum of |products|, scaled
    fp32_sum = (codes.float() @ layer.qweight.float().t()) * scales[:, None] * layer.wscales[None, :]
    ref16 = fp32_sum.half()
    out = {}
    for label, y32, y16 in (
            ("fp32 sum", fp32_sum, ref16),
            ("scaled_mm", scaled_mm(codes, scales, layer.qweight, layer.wscales, torch.float32),
             fp8.fp8_linear(x, layer.inv_smooth, layer.qweight, layer.wscales)),
            ("fast accum", scaled_mm(codes, scales, layer.qweight, layer.wscales, torch.float32, fast=True),
             scaled_mm(codes, scales, layer.qweight, layer.wscales, torch.float16, fast=True))):
        rel = ((y32.double() - exact).abs() / bound.clamp_min(1e-300)).max().item()
        out[f"{label} bits"] = -math.log2(rel) if rel > 0 else float("inf")
        out[f"{label} ratio"] = fp16_rounding_ratio(y16, exact.float(), exact.half())
        out[f"{label} bounded"] = fp8_output_ratio(y16, x, layer, acc_bits)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1024)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, sm_{props.major}{props.minor}; torch {torch.__version__}")
    torch.backends.cuda.matmul.allow_tf32 = False
    print("\n1. probes: small products lost (of K - 1) with the big one at position p")
    for k in (1024, 3072):
        positions = [0, 1, 31, 32, 63, 64, 127, 128, 255, 256, 511, 512, k - 1]
        for fast in (False, True):
            lost = probe(k, positions, fast)
            print(f"   K={k} fast_accum={fast!s:<5} " + " ".join(f"p{p}:{v:g}" for p, v in zip(positions, lost)))
    acc_bits = fp8.accumulator_bits(torch.device(DEVICE))
    print(f"\n   products 2**-j of the value they join arrive up to j = {acc_bits} (kernels.fp8.accumulator_bits)")
    print(f"\n2. M = {args.m}: effective bits = -log2 max |y - exact| / B; ratio = fp16 output vs exact "
          "within fp16 rounding alone; bounded = with the accumulation bound (<= 1 passes)")
    header = None
    for name, k, n in SHAPES:
        row = shape_errors(args.m, k, n, acc_bits)
        if header is None:
            header = list(row)
            print(f"   {'layer':<13}" + "".join(f"{h:>20}" for h in header))
        print(f"   {name:<13}" + "".join(f"{row[h]:>20.3f}" for h in header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
