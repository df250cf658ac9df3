"""Attention of the runner's packed CFG layout: the dense masked SDPA the graphs used before against
the ragged kernel (`kernels.ragged_attention`) in several tile settings, at OmniVoice's shapes.

Run on a CUDA machine from the repository root:

    python -m tools.kernels.bench_attention [--shapes 560x290 560x290x8 ...] [--graph-calls 28]
        [--before OTHER/kernels/ragged_attention.py [VARIANT.py:block_n=128,num_warps=8 ...]] [--no-sweep]
        [--json results.jsonl]

A shape is c x T [x n]: n sequences (default 1) of c prompt rows and T target rows each, packed as the
runner packs them; S is the runner's bucket for the n (c + T) rows. Each variant is timed as the model
runs it: `--graph-calls` launches (one per layer) captured in a CUDA graph and replayed; the time is the
median per call. TFLOP/s counts the useful work only, 4 D Hq (n (c^2 + T^2) + pads^2) per call, so a
kernel is charged for nothing it wastes. Error: the largest difference to an fp32 computation on the
rows that matter (prompts and targets), next to SDPA's own in fp16; `exact` is the test suite's rule
(at most twice SDPA's error plus one fp16 ulp of the largest output). `--before` times other copies of
the kernel's module (e.g. main's, before a change, and variants) beside these, each at its defaults or at the
settings after its colon (`PATH:key=value,...`); `--no-sweep` leaves out this tree's fourteen settings.
`--libraries` also times PyTorch's own variable-length attention on the same packing (one sequence per range
of keys): FlashAttention's `varlen_attn`, and SDPA on a nested (jagged) tensor with the cuDNN and flash
backends, each where this PyTorch has it.
"""
import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

from engine.lm.model import KeyRanges
from engine.lm.runner import DEFAULT_BUCKETS
from kernels.qk_norm_rope import qk_norm_rope
from kernels.ragged_attention import ragged_attention

N_Q_HEADS, N_KV_HEADS, HEAD_DIM = 16, 8, 128
# (block_m, block_n, num_warps, num_stages, group_heads, mask_all); group_heads stacks the two query heads
# of a KV head in one program (block_m rows each); mask_all masks every key block, else only edge blocks
CONFIGS = [(64, 64, 4, 3, False, True), (64, 64, 4, 3, False, False), (64, 64, 4, 2, False, False),
           (64, 32, 4, 3, False, True), (64, 32, 4, 3, False, False), (64, 32, 4, 2, False, False),
           (32, 32, 4, 3, True, True), (32, 32, 4, 3, True, False), (32, 64, 4, 2, True, True),
           (32, 64, 4, 3, True, False), (64, 64, 8, 3, True, False), (64, 64, 8, 2, True, False),
           (128, 64, 8, 3, False, False), (128, 32, 8, 3, False, False)]


def layout(c: int, T: int, n: int = 1) -> tuple[int, KeyRanges]:
    """The runner's packing of n sequences: [prompt | uncond target] each, then pads attending to each other."""
    S = next(b for b in DEFAULT_BUCKETS if n * (c + T) < b)
    bounds = torch.tensor([0] + [i * (c + T) + off for i in range(n) for off in (c, c + T)] + [S],
                          dtype=torch.int32, device="cuda")
    block = torch.bucketize(torch.arange(S, dtype=torch.int32, device="cuda"), bounds[1:], right=True)
    return S, KeyRanges(bounds[block].contiguous(), bounds[block + 1].contiguous())


def operands(S: int, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q [S, Hq, D], k and v [S, Hkv, D] fp16 as the fused model hands them to attention: `qk_norm_rope` of a
    random qkv projection output (unit norm weights, no rotation), so v is read in place with its row stride."""
    qkv = torch.randn(S, (N_Q_HEADS + 2 * N_KV_HEADS) * HEAD_DIM, device=device, dtype=torch.float16)
    ones = torch.ones(HEAD_DIM, device=device, dtype=torch.float16)
    no_rotation = torch.zeros(1, HEAD_DIM, device=device, dtype=torch.float16)
    return qk_norm_rope(qkv, ones, ones, ones[None], no_rotation, N_Q_HEADS, N_KV_HEADS, 1e-6)


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


def load_kernel(spec: str):
    """(name, call) for `PATH[:key=value,...]` (the settings after the last colon): `ragged_attention` of
    another copy of kernels/ragged_attention.py (it imports this tree's helpers) with those keyword settings."""
    path, colon, options = spec.rpartition(":")
    if not colon or (options and "=" not in options) or any(sep in options for sep in "/\\"):
        path, options = spec, ""  # no settings: the colon is the path's (a drive letter, a folder's name)
    settings = {key: value == "True" if value in ("True", "False") else int(value)
                for key, _, value in (item.partition("=") for item in options.split(",") if item)}
    module_spec = importlib.util.spec_from_file_location(f"ragged_attention_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return spec, lambda *args: module.ragged_attention(*args, **settings)


def sequence_bounds(ranges: KeyRanges) -> tuple[torch.Tensor, int]:
    """The packing as variable-length sequences: cumulative bounds [n + 1] (int32) and the longest length."""
    starts = torch.unique(ranges.start)
    bounds = torch.cat([starts, ranges.end[-1:]]).to(torch.int32)
    return bounds, int((bounds[1:] - bounds[:-1]).max())


def library_variants(q, k, v, ranges) -> dict:
    """PyTorch's variable-length attentions on the packing (GQA kept where the call takes it)."""
    bounds, longest = sequence_bounds(ranges)
    out = {}
    try:
        from torch.nn.attention.varlen import varlen_attn
        out["torch varlen_attn (flash)"] = (lambda: varlen_attn(q, k, v, bounds, bounds, longest, longest,
                                                                 enable_gqa=True), None)
    except ImportError:
        pass
    groups = q.shape[1] // k.shape[1]
    offsets = bounds.to(torch.int64)
    lengths = bounds[1:] - bounds[:-1]
    nested = [torch.nested.nested_tensor_from_jagged(t, offsets, min_seqlen=int(lengths.min()), max_seqlen=longest)
              for t in
              (q, k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1))]
    qn, kn, vn = (t.transpose(1, 2) for t in nested)  # [n, H, j, D]
    for name, backend in (("cudnn", torch.nn.attention.SDPBackend.CUDNN_ATTENTION),
                          ("flash", torch.nn.attention.SDPBackend.FLASH_ATTENTION)):
        def call(backend=backend):
            with torch.nn.attention.sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(qn, kn, vn).transpose(1, 2).values()
        out[f"sdpa nested {name} (kv heads repeated)"] = (call, None)
    return out


def variants(q, k, v, ranges, qh, kh, vh, mask, before, sweep) -> dict:
    """name -> (a call computing the attention ([S, Hq, D], or [1, Hq, S, D] for SDPA), its settings)."""
    out = {"sdpa masked (dense)": (lambda: torch.nn.functional.scaled_dot_product_attention(
        qh, kh, vh, attn_mask=mask, enable_gqa=True), None)}
    for name, call in before:
        out[name] = (lambda call=call: call(q, k, v, ranges.start, ranges.end), None)
    out["ragged: defaults"] = (lambda: ragged_attention(q, k, v, ranges.start, ranges.end), None)
    for bm, bn, w, st, g, ma in CONFIGS if sweep else ():
        settings = dict(block_m=bm, block_n=bn, num_warps=w, num_stages=st, group_heads=g, mask_all=ma)
        name = f"ragged {bm}x{bn} w{w} s{st}{' gqa' if g else ''}{' mask-all' if ma else ''}"
        out[name] = (lambda settings=settings: ragged_attention(q, k, v, ranges.start, ranges.end, **settings),
                     settings)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["560x290", "560x290x8", "150x80", "1000x600"])
    parser.add_argument("--graph-calls", type=int, default=28)
    parser.add_argument("--before", nargs="+", default=[],
                        help="other kernels/ragged_attention.py copies to time, PATH or PATH:key=value,...")
    parser.add_argument("--no-sweep", action="store_true", help="leave out the fourteen settings of this tree")
    parser.add_argument("--json", help="append one JSON line per result to this file")
    parser.add_argument("--libraries", action="store_true", help="also PyTorch's variable-length attentions")
    args = parser.parse_args(argv)
    before = [load_kernel(spec) for spec in args.before]
    torch.manual_seed(0)
    print(f"{'shape':<11} {'S':>5} {'variant':<48} {'us/call':>8} {'TFLOP/s':>8} {'max err':>9} {'sdpa err':>9} exact")
    for shape in args.shapes:
        c, T, n = (list(map(int, shape.split("x"))) + [1])[:3]
        S, ranges = layout(c, T, n)
        q, k, v = operands(S)
        mask = ranges.additive_mask(torch.float16)
        qh, kh, vh = (t.transpose(0, 1)[None] for t in (q, k, v))  # [1, H, S, D] views, as the model has them
        pads = S - n * (c + T)
        flop = 4 * HEAD_DIM * N_Q_HEADS * (n * (c * c + T * T) + pads * pads)
        exact = torch.nn.functional.scaled_dot_product_attention(
            qh.float(), kh.float(), vh.float(), attn_mask=mask.float(), enable_gqa=True)[0].transpose(0, 1)
        real = slice(0, n * (c + T))
        fns = variants(q, k, v, ranges, qh, kh, vh, mask, before, not args.no_sweep)
        if args.libraries:
            fns.update(library_variants(q, k, v, ranges))
        sdpa_err = (fns["sdpa masked (dense)"][0]()[0].transpose(0, 1)[real].float() - exact[real]).abs().max().item()
        allowed = 2 * sdpa_err + torch.finfo(torch.float16).eps * exact[real].abs().max().item()
        for name, (fn, settings) in fns.items():
            try:
                out = fn()
                out = out[0].transpose(0, 1) if out.dim() == 4 else out
                err = (out[real].float() - exact[real]).abs().max().item()
                us = per_call_us(fn, args.graph_calls)
            except Exception as exc:  # a config that does not fit this GPU must not stop the others
                print(f"{shape:<11} {S:>5} {name:<48} failed: {type(exc).__name__}: {str(exc)[:80]}", flush=True)
                continue
            ok = err <= allowed
            print(f"{shape:<11} {S:>5} {name:<48} {us:8.1f} {flop / us / 1e6:8.1f} {err:9.2e} {sdpa_err:9.2e} "
                  f"{'yes' if ok else 'NO'}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(dict(shape=shape, S=S, variant=name, us=us, tflops=flop / us / 1e6, err=err,
                                            sdpa_err=sdpa_err, exact=ok, settings=settings)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
