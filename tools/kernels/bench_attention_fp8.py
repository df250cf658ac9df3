"""The FP8 attention prototype (tools/kernels/attention_fp8.py) against main's fp16 ragged attention, at the
runner's packing of a baseline generation (560 prompt + 290 target rows) and a 3 s output (200 x 80):

    python -m tools.kernels.bench_attention_fp8 [--shapes 560x290 200x80] [--graph-calls 28] [--json results.jsonl]

Each variant is timed as `tools.kernels.bench_attention` times kernels (`--graph-calls` launches captured in
one CUDA graph, the median per call of 20 replays). Variants: main's kernel at its defaults; the FP8 kernel on
operands quantized beforehand, at its defaults and a few other tiles (each tile's sm_90 registers and spills:
`python -m tools.kernels.aot_attention_fp8`); the FP8 kernel with the prototype's PyTorch quantizer in the
graph (an upper bound for the quantizing: the product would do it inside kernels/qk_norm_rope.py). Error: the
largest difference to float64 attention of the unquantized fp16 inputs on the rows that matter, and the same
divided by the largest softmax-weighted |v| (relative error), beside fp16's.
"""
import argparse
import json
import sys

import torch

from kernels.ragged_attention import ragged_attention, ragged_attention_ref
from tools.kernels.attention_fp8 import quantize_attention_inputs, ragged_attention_fp8
from tools.kernels.bench_attention import HEAD_DIM, N_Q_HEADS, layout, operands, per_call_us

FP8_TILES = [dict(), dict(block_n=128), dict(num_warps=8), dict(block_n=128, num_warps=8), dict(num_stages=2),
             dict(block_m=64, num_warps=8)]


def variants(q, k, v, ranges) -> dict:
    """name -> a call computing [S, Hq, D] attention."""
    ops = quantize_attention_inputs(q, k, v)
    out = {"fp16 main ragged_attention": lambda: ragged_attention(q, k, v, ranges.start, ranges.end)}
    for tiles in FP8_TILES:
        name = "fp8 " + (",".join(f"{key}={value}" for key, value in tiles.items()) or "defaults")
        out[name] = lambda tiles=tiles: ragged_attention_fp8(ops, ranges.start, ranges.end, **tiles)
    out["fp8 defaults + torch quantizer"] = lambda: ragged_attention_fp8(quantize_attention_inputs(q, k, v),
                                                                         ranges.start, ranges.end)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["560x290", "200x80"])
    parser.add_argument("--graph-calls", type=int, default=28)
    parser.add_argument("--json", help="append one JSON line per result to this file")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(f"{'shape':<9} {'S':>5} {'variant':<40} {'us/call':>8} {'TFLOP/s':>8} {'max err':>9} {'rel err':>9}")
    for shape in args.shapes:
        c, T = map(int, shape.split("x"))
        S, ranges = layout(c, T)
        q, k, v = operands(S)
        real = slice(0, c + T)
        flop = 4 * HEAD_DIM * N_Q_HEADS * (c * c + T * T + (S - c - T) ** 2)
        exact = ragged_attention_ref(q.double(), k.double(), v.double(), ranges.start, ranges.end)[real]
        weighted_abs = ragged_attention_ref(q.double(), k.double(), v.double().abs(), ranges.start, ranges.end)[real]
        scale = weighted_abs.max().item()
        for name, fn in variants(q, k, v, ranges).items():
            try:
                err = (fn()[real].double() - exact).abs().max().item()
                us = per_call_us(fn, args.graph_calls)
            except Exception as exc:  # a tile that does not fit must not stop the others
                print(f"{shape:<9} {S:>5} {name:<40} failed: {type(exc).__name__}: {str(exc)[:80]}", flush=True)
                continue
            print(f"{shape:<9} {S:>5} {name:<40} {us:8.1f} {flop / us / 1e6:8.1f} {err:9.2e} {err / scale:9.2e}",
                  flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(dict(shape=shape, S=S, variant=name, us=us, tflops=flop / us / 1e6, err=err,
                                            rel_err=err / scale)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
