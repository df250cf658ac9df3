"""Attention of the runner's packed CFG layout: the dense masked SDPA the graphs used before against
the ragged kernel (`kernels.ragged_attention`) in several tile settings, at OmniVoice's shapes.

Run on a CUDA machine from the repository root:

    python -m tools.kernels.bench_attention [--shapes 560x290 ...] [--graph-calls 28]

A shape is c x T (prompt rows x target rows); the bucket S is the runner's bucket for c + T rows.
Each variant is timed as the model runs it: `--graph-calls` launches (one per layer) captured in a
CUDA graph and replayed; the time is per call. TFLOP/s counts the useful work only, 4 D Hq
(c^2 + T^2 + pads^2) per call, so a dense kernel is charged for nothing it wastes. Error: the largest
difference to an fp32 computation on the rows that matter (prompt and target), next to SDPA's own.
"""
import argparse

import torch

from engine.lm.model import KeyRanges
from engine.lm.runner import DEFAULT_BUCKETS
from kernels.ragged_attention import ragged_attention

N_Q_HEADS, N_KV_HEADS, HEAD_DIM = 16, 8, 128
# (block_m, block_n, num_warps, num_stages, group_heads): each compiles for sm_90 without spills
CONFIGS = [(64, 64, 4, 2, False), (64, 64, 4, 3, False), (128, 64, 8, 2, False), (64, 128, 4, 2, False),
           (128, 128, 8, 2, False), (32, 64, 4, 2, True), (64, 64, 8, 2, True), (64, 64, 8, 3, True),
           (32, 128, 4, 2, True), (64, 128, 8, 2, True)]


def layout(c: int, T: int) -> tuple[int, KeyRanges]:
    S = next(b for b in DEFAULT_BUCKETS if c + T < b)
    bounds = torch.tensor([0, c, c + T, S], dtype=torch.int32, device="cuda")
    block = torch.bucketize(torch.arange(S, dtype=torch.int32, device="cuda"), bounds[1:], right=True)
    return S, KeyRanges(bounds[block].contiguous(), bounds[block + 1].contiguous())


def per_call_us(fn, calls: int, replays: int = 20) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # compile / autotune outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["560x290", "150x80", "1000x600"])
    parser.add_argument("--graph-calls", type=int, default=28)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(f"{'shape':<10} {'S':>5} {'variant':<26} {'us/call':>8} {'TFLOP/s':>8} {'max err':>9} {'sdpa err':>9}")
    for shape in args.shapes:
        c, T = map(int, shape.split("x"))
        S, ranges = layout(c, T)
        q = torch.randn(S, N_Q_HEADS, HEAD_DIM, device="cuda", dtype=torch.float16)
        k = torch.randn(S, N_KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.float16)
        v = torch.randn(S, N_KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.float16)
        mask = ranges.additive_mask(torch.float16)
        qh, kh, vh = (t.transpose(0, 1)[None] for t in (q, k, v))  # [1, H, S, D] views, as the model has them
        pads = S - c - T
        flop = 4 * HEAD_DIM * N_Q_HEADS * (c * c + T * T + pads * pads)

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, enable_gqa=True)

        exact = torch.nn.functional.scaled_dot_product_attention(
            qh.float(), kh.float(), vh.float(), attn_mask=mask.float(), enable_gqa=True)[0].transpose(0, 1)
        real = slice(0, c + T)
        sdpa_err = (sdpa()[0].transpose(0, 1)[real].float() - exact[real]).abs().max().item()
        variants = {"sdpa masked (dense)": sdpa}
        for bm, bn, w, st, g in CONFIGS:
            settings = dict(block_m=bm, block_n=bn, num_warps=w, num_stages=st, group_heads=g)
            variants[f"ragged {bm}x{bn} w{w} s{st}{' gqa' if g else ''}"] = (
                lambda settings=settings: ragged_attention(q, k, v, ranges.start, ranges.end, **settings))
        for name, fn in variants.items():
            try:
                out = fn()
                out = out[0].transpose(0, 1) if out.dim() == 4 else out
                err = (out[real].float() - exact[real]).abs().max().item()
                us = per_call_us(fn, args.graph_calls)
            except Exception as exc:  # a config that does not fit this GPU must not stop the others
                print(f"{shape:<10} {S:>5} {name:<26} failed: {type(exc).__name__}: {str(exc)[:80]}")
                continue
            print(f"{shape:<10} {S:>5} {name:<26} {us:8.1f} {flop / us / 1e6:8.1f} {err:9.2e} {sdpa_err:9.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
