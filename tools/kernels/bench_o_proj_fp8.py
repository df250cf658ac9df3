"""Realtime's o_proj in FP8 with its input quantized by the attention kernel, against the fp16 o_proj, at
OmniVoice's shapes (16 query heads, 8 KV heads of 128, hidden 1024).

Run on a CUDA machine from the repository root:

    python -m tools.kernels.bench_o_proj_fp8 [--shapes 560x290 200x80] [--json results.jsonl]

A shape is c x T as in `tools.kernels.bench_attention` (the runner's packing of one request, S its bucket).
Each stage of the attention sublayer is timed alone, then the chain from the q/k norm to the residual add +
RMSNorm that quantizes for gate_up: fp16 (today's Realtime) against FP8 (v bound in the q/k norm, e4m3
codes from the attention, unit-scale `_scaled_mm`, scales applied by the norm), and the separate
quantizer's form (fp16 attention, `quantize_act_fp8`, rowwise `_scaled_mm`). Times are us per call replayed
from a CUDA graph of 32 calls over 8 weight copies (`check_realtime_gpu.graph_us`). Numerics: o_proj's
output against the fp16 one (relative Frobenius error) with the v-bound scales and with each row's own amax,
and how loose the bound is (bound / amax of the row's smoothed attention output).
"""
import argparse
import json
import sys

import torch

from kernels.fp8 import FP8Rows, fp8_rows_linear, fp8_rows_product, quantize_act_fp8, scaled_product_ref
from kernels.fp8_ref import quantize_rows_fp8_ref
from kernels.qk_norm_rope import qk_norm_rope
from kernels.ragged_attention import ragged_attention, ragged_attention_fp8
from kernels.rmsnorm import add_rmsnorm_fp8
from tools.kernels.bench_attention import HEAD_DIM, N_KV_HEADS, N_Q_HEADS, layout
from tools.kernels.check_realtime_gpu import COPIES, graph_us

HIDDEN = 1024
EPS = 1e-6


def o_proj_weights(k: int, n: int, smooth: torch.Tensor) -> tuple[list, list, list]:
    """COPIES fp16 weights [n, k] and their FP8 forms (qweight of W diag(smooth), per-channel scales)."""
    w16, qweights, wscales = [], [], []
    for _ in range(COPIES):
        w = torch.randn(n, k, device="cuda") / k ** 0.5
        codes, scales = quantize_rows_fp8_ref(w * smooth)
        w16.append(w.half())
        qweights.append(codes)
        wscales.append(scales)
    return w16, qweights, wscales


def relative_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.double() - ref.double()).norm() / ref.double().norm()).item()


def run_shape(shape: str) -> list[dict]:
    c, T = map(int, shape.split("x"))
    S, ranges = layout(c, T)
    d_q = N_Q_HEADS * HEAD_DIM
    qkv = torch.randn(S, (N_Q_HEADS + 2 * N_KV_HEADS) * HEAD_DIM, device="cuda", dtype=torch.float16)
    norm_w = torch.ones(HEAD_DIM, device="cuda", dtype=torch.float16)
    cos, sin = torch.ones(1, HEAD_DIM, device="cuda", dtype=torch.float16), torch.zeros(1, HEAD_DIM, device="cuda",
                                                                                        dtype=torch.float16)
    smooth = torch.exp(0.3 * torch.randn(d_q, device="cuda"))  # o_proj's smoothing factors
    gate_smooth = torch.exp(0.3 * torch.randn(HIDDEN, device="cuda"))
    hidden_w = torch.ones(HIDDEN, device="cuda", dtype=torch.float16)
    residual = torch.randn(S, HIDDEN, device="cuda", dtype=torch.float16)
    w16, qweights, wscales = o_proj_weights(d_q, HIDDEN, smooth)
    q = torch.empty(S, N_Q_HEADS, HEAD_DIM, device="cuda", dtype=torch.float16)
    k = torch.empty(S, N_KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.float16)
    v_bound = torch.empty(S, device="cuda")
    _, _, v = qk_norm_rope(qkv, norm_w, norm_w, cos, sin, N_Q_HEADS, N_KV_HEADS, EPS, out=(q, k),
                           v_bound=(smooth, v_bound))
    o16 = torch.empty(S, d_q, device="cuda", dtype=torch.float16)
    rows = FP8Rows(torch.empty(S, d_q, device="cuda", dtype=torch.float8_e4m3fn), torch.empty(S, device="cuda"),
                   torch.Size((S, d_q)), torch.float16)
    h16 = torch.empty(S, HIDDEN, device="cuda", dtype=torch.float16)

    def qk_plain(i):
        qk_norm_rope(qkv, norm_w, norm_w, cos, sin, N_Q_HEADS, N_KV_HEADS, EPS, out=(q, k))

    def qk_bound(i):
        qk_norm_rope(qkv, norm_w, norm_w, cos, sin, N_Q_HEADS, N_KV_HEADS, EPS, out=(q, k), v_bound=(smooth, v_bound))

    def attention16(i):
        ragged_attention(q, k, v, ranges.start, ranges.end, out=o16.view(S, N_Q_HEADS, HEAD_DIM))

    def attention8(i):
        ragged_attention_fp8(q, k, v, ranges.start, ranges.end, v_bound=v_bound, smooth=smooth, out=rows)

    def o_proj16(i):
        torch.mm(o16, w16[i].t(), out=h16)

    def o_proj8_unit(i):
        return fp8_rows_product(rows, qweights[i], wscales[i])

    def o_proj8_rowwise(i):
        return fp8_rows_linear(rows, qweights[i], wscales[i])

    def quantize_separately(i):
        return quantize_act_fp8(o16, smooth)

    def norm16(i):
        return add_rmsnorm_fp8(h16, residual, hidden_w, EPS, gate_smooth)

    attention8(0)
    product = o_proj8_unit(0)  # the consumer's input, timed alone

    def norm_of_product(i):
        return add_rmsnorm_fp8(product, residual, hidden_w, EPS, gate_smooth)

    def chain16(i):
        qk_plain(i), attention16(i), o_proj16(i)
        return norm16(i)

    def chain8(i):
        qk_bound(i), attention8(i)
        return add_rmsnorm_fp8(o_proj8_unit(i), residual, hidden_w, EPS, gate_smooth)

    def chain_separate_quantizer(i):
        qk_plain(i), attention16(i)
        codes, scales = quantize_separately(i)
        h = fp8_rows_linear(FP8Rows(codes, scales, o16.shape, o16.dtype), qweights[i], wscales[i])
        return add_rmsnorm_fp8(h, residual, hidden_w, EPS, gate_smooth)

    stages = {"qk_norm_rope": qk_plain, "qk_norm_rope + v_bound": qk_bound, "attention fp16 out": attention16,
              "attention e4m3 out": attention8, "o_proj fp16": o_proj16, "o_proj FP8 unit scales, bf16": o_proj8_unit,
              "o_proj FP8 rowwise, fp16": o_proj8_rowwise, "quantize_act_fp8 (separate)": quantize_separately,
              "add_rmsnorm_fp8 of fp16": norm16, "add_rmsnorm_fp8 of FP8 product": norm_of_product,
              "chain fp16 (today)": chain16, "chain FP8 from the attention": chain8,
              "chain FP8, separate quantizer": chain_separate_quantizer}
    results = []
    for name, fn in stages.items():
        us = graph_us(fn)
        results.append(dict(shape=shape, S=S, stage=name, us=us))
        print(f"{shape:<8} {S:>5} {name:<34} {us:8.2f} us", flush=True)
    # numerics, with weight copy 0
    qk_bound(0), attention16(0), attention8(0), o_proj16(0)
    amax = (o16.float() / smooth).abs().amax(dim=1)  # [S] each row's own amax
    looseness = (rows.scales * 448.0 / amax)[: c + T]
    own = quantize_act_fp8(o16, smooth)
    h_own = fp8_rows_linear(FP8Rows(*own, o16.shape, o16.dtype), qweights[0], wscales[0])
    p = o_proj8_unit(0)
    h_bound = scaled_product_ref(p.raw, row_scales=p.row_scales, col_scales=p.col_scales, out_dtype=torch.float16)
    numerics = dict(shape=shape, S=S, err_bound_scales=relative_error(h_bound[: c + T], h16[: c + T]),
                    err_amax_scales=relative_error(h_own[: c + T], h16[: c + T]),
                    looseness_median=looseness.median().item(), looseness_max=looseness.max().item())
    print(f"{shape:<8} {S:>5} o_proj vs fp16, relative error: v-bound scales {numerics['err_bound_scales']:.3e}, "
          f"own amax {numerics['err_amax_scales']:.3e}; bound / amax median {numerics['looseness_median']:.2f}, "
          f"max {numerics['looseness_max']:.2f} (random weights)", flush=True)
    return results + [numerics]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["560x290", "200x80"])
    parser.add_argument("--json", help="append one JSON line per result to this file")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    for shape in args.shapes:
        for result in run_shape(shape):
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
