"""Realtime-mode kernels on this GPU, per LM linear: `python -m tools.kernels.check_realtime_gpu [--m 1024]`.

For the qkv / o / gate_up / down shapes at M tokens it
1. checks every path against its plain-PyTorch reference: W4A4 codes and scales bit-exact, integer
   group sums exact (first 256 rows) for both code containers and both GEMM tiles, output within
   fp16 rounding (ratio <= 1); FP8 codes and scales bit-exact, output within fp16 rounding of the
   exact sum plus what this GPU's FP8 accumulator may lose (`kernels.fp8_ref.fp8_output_ratio`);
2. times, per call, replayed from a CUDA graph as the engine runs them (no launch overhead) and with
   the weights of 8 layers in turn (more than L2 holds, as in a forward): cuBLAS fp16; W4A4 quantize,
   GEMM (e4m3 and int8 containers, both tiles) and quantize + GEMM; FP8 quantize, `_scaled_mm` and both;
3. sums them over a forward (28 layers) against cuBLAS fp16: realtime must stay within 15 % of HiFi;
4. lists the MMA instructions, registers and spills of the kernels as compiled for this GPU (`tools/kernels/aot.py`).
Takes well under 90 s on an H200. Exits non-zero when a check fails.
"""
import argparse
import statistics
import sys
from types import SimpleNamespace

import torch
import triton

from kernels import fp8, w4a4_triton
from kernels.fp8_ref import fp8_linear_ref, fp8_output_ratio, quantize_act_fp8_ref, quantize_rows_fp8_ref
from kernels.numerics import fp16_rounding_ratio, ieee_reciprocal
from kernels.w4a4_ref import (
    group_sums_ref,
    quantize_act_lowrank_ref,
    unpack_int4,
    w4a4_linear_ref,
)
from tools.kernels import aot
from tools.kernels.check_w4a4_cuda import LAYERS, SHAPES, make_input, make_layer

STEPS = 32  # forwards per generation (the baseline request)
COPIES = 8  # weight sets cycled through while timing
SUM_ROWS = 256
RANK = 32
DEVICE = "cuda"


def make_w4a4(k: int, n: int, seed: int) -> SimpleNamespace:
    layer = make_layer(k, n, RANK, seed)  # the same draws as the INT4 check, without a bias
    layer.bias = None
    return layer


def make_fp8(k: int, n: int, seed: int) -> SimpleNamespace:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    codes, scales = quantize_rows_fp8_ref(0.05 * torch.randn(n, k, device=DEVICE, generator=g))
    smooth = 0.5 + torch.rand(k, device=DEVICE, generator=g)
    return SimpleNamespace(inv_smooth=ieee_reciprocal(smooth), qweight=codes, wscales=scales,
                           lora_down=None, lora_up=None, bias=None)


def graph_us(fn, calls: int = 4 * COPIES, replays: int = 10) -> float:
    """Median time per call in us of fn(i) (i = 0, 1, ...: which weight copy), replayed from a CUDA graph."""
    fn(0)  # compile and warm up outside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i % COPIES)
    graph.replay()
    return replay_us(graph, replays) / calls


def replay_us(graph: torch.cuda.CUDAGraph, replays: int) -> float:
    """Median time in us of one replay of `graph`, over `replays` timed replays."""
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def check_w4a4(name: str, x: torch.Tensor, layer: SimpleNamespace) -> list[str]:
    """Failures of the W4A4 Triton path on one input, for both containers and both tiles."""
    failures = []
    want = quantize_act_lowrank_ref(x, layer.smooth, layer.lora_down, pack=False)
    ref32, ref16 = w4a4_linear_ref(x.float(), layer), w4a4_linear_ref(x, layer)
    rows = slice(0, SUM_ROWS)
    sums_ref = group_sums_ref(want.codes[rows], unpack_int4(layer.qweight))
    for layout in ("e4m3", "int8"):
        act = w4a4_triton.quantize_act(x, layer.smooth, layer.lora_down, layout=layout)
        if not (torch.equal(act.codes.float(), want.codes.float()) and torch.equal(act.scales, want.scales)):
            failures.append(f"{name}: W4A4 {layout} codes or scales differ from the reference")
        codes = w4a4_triton.weight_codes(layer.qweight, layout)
        for tile in ("128x128", "64x128"):
            y, sums = w4a4_triton.w4a4_gemm_debug(act, codes, layer.wscales, layer.lora_up, layer.bias, tile=tile)
            ratio = fp16_rounding_ratio(y, ref32, ref16)
            exact = torch.equal(sums[rows], sums_ref)
            del sums
            if not exact or ratio > 1:
                failures.append(f"{name}: W4A4 {layout} {tile}: group sums exact {exact}, fp16 ratio {ratio:.3f}")
    return failures


def check_fp8(name: str, x: torch.Tensor, layer: SimpleNamespace) -> list[str]:
    """Codes and scales bit-exact; the output within fp16 rounding of the exact sum of the quantized
    operands plus the accumulation bound of this GPU's FP8 tensor cores (kernels/fp8_ref.py)."""
    failures = []
    codes, scales = fp8.quantize_act_fp8(x, layer.inv_smooth)
    want_codes, want_scales = quantize_act_fp8_ref(x, layer.inv_smooth)
    if not (torch.equal(codes.view(torch.uint8), want_codes.view(torch.uint8)) and torch.equal(scales, want_scales)):
        failures.append(f"{name}: FP8 codes or scales differ from the reference")
    y = fp8.fp8_linear(x, layer.inv_smooth, layer.qweight, layer.wscales)
    ratio = fp8_output_ratio(y, x, layer, fp8.accumulator_bits(x.device))
    fp32_ratio = fp16_rounding_ratio(y, fp8_linear_ref(x.float(), layer), fp8_linear_ref(x, layer))
    print(f"   {name}: FP8 output {ratio:.3f} x its allowance ({fp32_ratio:.3f} x fp16 rounding of an fp32 sum)")
    if ratio > 1:
        failures.append(f"{name}: FP8 output {ratio:.3f} x its allowance")
    return failures


COLUMNS = [("fp16", 7), ("w4 quant", 9), ("gemm e4m3", 10), ("128x128", 8), ("64x128", 7), ("int8", 6),
           ("w4 q+gemm", 10), ("x fp16", 7), ("fp8 quant", 10), ("mm", 6), ("fp8 q+mm", 9), ("x fp16", 7)]


def time_layer(m: int, k: int, n: int) -> list[float]:
    x = make_input(m, k, seed=1)
    w16 = [0.05 * torch.randn(n, k, device=DEVICE, dtype=torch.float16) for _ in range(COPIES)]
    w4 = [make_w4a4(k, n, seed=c) for c in range(COPIES)]
    e4m3 = [w4a4_triton.weight_codes(w.qweight, "e4m3") for w in w4]
    int8 = [w4a4_triton.weight_codes(w.qweight, "int8") for w in w4]
    f8 = [make_fp8(k, n, seed=c) for c in range(COPIES)]
    out = torch.empty(m, n, device=DEVICE, dtype=torch.float16)
    quantize = w4a4_triton.quantize_act
    act = {layout: quantize(x, w4[0].smooth, w4[0].lora_down, layout=layout) for layout in ("e4m3", "int8")}

    def gemm(codes, layout, tile=None):
        return lambda i: w4a4_triton.w4a4_gemm(act[layout], codes[i], w4[i].wscales, w4[i].lora_up, out=out, tile=tile)

    def w4a4_linear(i):
        a = quantize(x, w4[i].smooth, w4[i].lora_down, layout="e4m3")
        w4a4_triton.w4a4_gemm(a, e4m3[i], w4[i].wscales, w4[i].lora_up, out=out)

    fp8_codes, fp8_scales = fp8.quantize_act_fp8(x, f8[0].inv_smooth)
    times = [
        graph_us(lambda i: torch.mm(x, w16[i].t(), out=out)),
        graph_us(lambda i: quantize(x, w4[i].smooth, w4[i].lora_down, layout="e4m3")),
        graph_us(gemm(e4m3, "e4m3")),
        graph_us(gemm(e4m3, "e4m3", "128x128")),
        graph_us(gemm(e4m3, "e4m3", "64x128")),
        graph_us(gemm(int8, "int8")),
        graph_us(w4a4_linear),
        0.0,
        graph_us(lambda i: fp8.quantize_act_fp8(x, f8[i].inv_smooth)),
        graph_us(lambda i: fp8.scaled_mm_rowwise(fp8_codes, fp8_scales, f8[i].qweight, f8[i].wscales, x.dtype)),
        graph_us(lambda i: fp8.fp8_linear(x, f8[i].inv_smooth, f8[i].qweight, f8[i].wscales)),
        0.0,
    ]
    times[7], times[11] = times[6] / times[0], times[10] / times[0]
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1024, help="tokens (packed rows) per forward")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    print(f"{props.name}, sm_{props.major}{props.minor}, {props.multi_processor_count} SMs; torch {torch.__version__}, "
          f"triton {triton.__version__}; M = {args.m}; W4A4 container here: {w4a4_triton.mma_layout(device)}")
    if not fp8.fp8_supported(device):
        print("FP8 (sm_89+ with rowwise torch._scaled_mm) does not run here")
        return 2

    failures = []
    print(f"FP8 accumulator here: {fp8.accumulator_bits(device)} bits below the leading one (fp32: 23)")
    for name, k, n in SHAPES:
        x = make_input(args.m, k, seed=0)
        failures += check_w4a4(name, x, make_w4a4(k, n, seed=0))
        failures += check_fp8(name, x, make_fp8(k, n, seed=0))
    print("\n1. correctness: " + ("all paths match their references" if not failures else ""))
    for failure in failures:
        print("   FAIL " + failure)

    print(f"\n2. us per call (CUDA graph replay, {COPIES} weight sets in turn); 'x fp16' = time / cuBLAS fp16")
    print(f"{'layer':<13}" + "".join(f"{title:>{width + 1}}" for title, width in COLUMNS))
    total = [0.0] * len(COLUMNS)
    for name, k, n in SHAPES:
        times = time_layer(args.m, k, n)
        total = [t + LAYERS * v for t, v in zip(total, times)]
        print(f"{name:<13}" + "".join(f"{v:>{w + 1}.{2 if title == 'x fp16' else 1}f}"
                                      for v, (title, w) in zip(times, COLUMNS)), flush=True)
    total[7], total[11] = total[6] / total[0], total[10] / total[0]
    print(f"{'forward (ms)':<13}" + "".join(f"{v / (1 if title == 'x fp16' else 1000):>{w + 1}.2f}"
                                           for v, (title, w) in zip(total, COLUMNS)))
    print(f"\n3. linears vs cuBLAS fp16 (HiFi: 158 ms end to end for {STEPS} steps, so 15 % = 24 ms):")
    for label, column in (("W4A4 Triton", 6), ("W8A8 FP8", 10)):
        extra = total[column] - total[0]  # us per forward
        print(f"   {label:<12} {extra / 1000:+.2f} ms per forward, {STEPS * extra / 1000:+.1f} ms per generation")
    print("\n4. the kernels as compiled for this GPU")
    aot.main([f"{props.major}{props.minor}"])
    print("\nALL CHECKS PASSED" if not failures else "\nSOME CHECKS FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
