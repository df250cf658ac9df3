"""Which of o_proj and down_proj pay in FP8 with unit scales: `python -m tools.kernels.bench_fp8_layer [--rows M ...]
[--model-rows M ...] [--json PATH]` (GPU only).

One decoder layer's chains at M rows, us per call replayed from a CUDA graph with 8 weight sets in turn
(`check_realtime_gpu.graph_us`), operands RANDOM (x ~ N(0, 1), weights 0.05 N(0, 1), smoothing in [0.5, 1.5)):
- MLP, from post_attn_norm's residual add to the next input norm's (qkv and gate_up FP8 as Realtime runs them):
  fp16 down: add_rmsnorm_fp8 + gate_up product + swiglu_scaled + F.linear + add_rmsnorm_fp8 (Realtime today);
  FP8 down: ... + swiglu_scaled_fp8 (FP8Rows) + down's unit-scale product + add_rmsnorm_fp8 of the product;
  FP8 down, separate: ... + swiglu_scaled + quantize_act_fp8 + down product + add_rmsnorm_fp8 of the product;
- attention out, from the attention's fp16 output to post_attn_norm's output:
  fp16 o_proj: F.linear + add_rmsnorm_fp8 (today); FP8 o_proj: quantize_act_fp8 + o_proj product + add_rmsnorm_fp8
  of the product;
- each chain's kernels alone;
- a CANDIDATE outside the contract, timing only: one static per-tensor scale for down's and o_proj's inputs (a
  calibrated one would take its place), so the quantizer needs no row reduction and runs tiled like the SwiGLU
  (`_swiglu_static_kernel`, `_quantize_static_kernel` below): what such scales would be worth, not whether their
  numerics hold (that needs real weights).
Then the whole model's step at --model-rows: a random full-size LM (fp16, `ModelConfig()`), converted by
`engine.quant.realtime.fp8_config` for each choice of FP8 linears in MODEL_CHOICES, fused kernels on, one forward of
M packed rows (one sequence, logits of the last half) replayed from a CUDA graph, ms per step, with 1 - cosine of
its logits against the fp16 model's (random weights: the figure says how far the choice moves the output, not
what real weights do).

Checked first on the GPU (exit status 1 if any fails): swiglu_scaled_fp8's codes and scales bit for bit
quantize_act_fp8 of swiglu_scaled's output; the candidates' codes equal the same arithmetic in torch; each FP8 chain's
new residual within the FP8 error of the fp16 chain's (relative Frobenius distance <= 0.1; e4m3 quantization gives
~0.04). Well under two minutes on an H200.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from kernels import fp8
from kernels._triton import _INTERPRET, tl, triton
from kernels.fp8 import _round_to_e4m3
from kernels.fp8_ref import FP8_DTYPE, FP8_MAX
from kernels.rmsnorm import add_rmsnorm_fp8
from kernels.swiglu import silu_mul, swiglu_scaled, swiglu_scaled_fp8
from tools.provenance import commit_id

HIDDEN, INTER, Q_DIM = 1024, 3072, 2048
ROWS = (256, 320, 896, 1792)
MODEL_ROWS = (320, 896)  # a 3 s output's bucket and the baseline's
EPS = 1e-6
STATIC_BLOCK = 1024
MODEL_CHOICES = {  # name -> the FP8 linears (fp8_config's argument); None: the fp16 model (High fidelity's linears)
    "fp16": None,
    "today (qkv, gate_up)": ("*.qkv_proj", "*.gate_up_proj"),
    "+ down": ("*.qkv_proj", "*.gate_up_proj", "*.down_proj"),
    "+ o_proj": ("*.qkv_proj", "*.gate_up_proj", "*.o_proj"),
    "all four": ("*.qkv_proj", "*.o_proj", "*.gate_up_proj", "*.down_proj"),
}


@triton.jit
def _static_e4m3(x, inv_smooth_ptr, inv_scale, cols, mask):
    v = tl.minimum(tl.maximum(x * tl.load(inv_smooth_ptr + cols, mask=mask, other=1.0) * inv_scale, -448.0), 448.0)
    if _INTERPRET:
        v = _round_to_e4m3(v)
    return v.to(tl.float8e4nv)


@triton.jit
def _swiglu_static_kernel(raw_ptr, row_scales_ptr, col_scales_ptr, inv_smooth_ptr, inv_scale_ptr, codes_ptr,
                          stride_raw, n_cols, BLOCK: tl.constexpr):
    """The candidate: swiglu_scaled's output (fp16) * inv_smooth * one static 1 / scale, e4m3, tiled like
    swiglu_scaled."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_scale = tl.load(row_scales_ptr + row)
    gate = tl.load(raw_ptr + row * stride_raw + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(raw_ptr + row * stride_raw + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    gate = (gate * row_scale * tl.load(col_scales_ptr + cols, mask=mask, other=0.0)).to(tl.float16)
    up = (up * row_scale * tl.load(col_scales_ptr + n_cols + cols, mask=mask, other=0.0)).to(tl.float16)
    act = silu_mul(gate, up).to(tl.float16).to(tl.float32)
    codes = _static_e4m3(act, inv_smooth_ptr, tl.load(inv_scale_ptr), cols, mask)
    tl.store(codes_ptr + row * n_cols + cols, codes, mask=mask)


@triton.jit
def _quantize_static_kernel(x_ptr, inv_smooth_ptr, inv_scale_ptr, codes_ptr, stride_x, n_cols, BLOCK: tl.constexpr):
    """The candidate: x * inv_smooth * one static 1 / scale, e4m3, tiled."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(codes_ptr + row * n_cols + cols, _static_e4m3(x, inv_smooth_ptr, tl.load(inv_scale_ptr), cols, mask),
             mask=mask)


def swiglu_static(p: fp8.FP8Product, inv_smooth: torch.Tensor, scale: torch.Tensor) -> fp8.FP8Rows:
    """The candidate's FP8Rows for down_proj: the static scale as every row's scale."""
    m, n = p.raw.shape[0], p.raw.shape[1] // 2
    codes = torch.empty(m, n, dtype=FP8_DTYPE, device=p.raw.device)
    _swiglu_static_kernel[(m, triton.cdiv(n, STATIC_BLOCK))](
        p.raw, p.row_scales, p.col_scales, inv_smooth, scale.inv, codes, p.raw.stride(0), n, BLOCK=STATIC_BLOCK,
        num_warps=4, enable_fp_fusion=False)
    return fp8.FP8Rows(codes, scale.rows, torch.Size((m, n)), p.dtype)


def quantize_static(x: torch.Tensor, inv_smooth: torch.Tensor, scale) -> fp8.FP8Rows:
    m, n = x.shape
    codes = torch.empty(m, n, dtype=FP8_DTYPE, device=x.device)
    _quantize_static_kernel[(m, triton.cdiv(n, STATIC_BLOCK))](x, inv_smooth, scale.inv, codes, x.stride(0), n,
                                                              BLOCK=STATIC_BLOCK, num_warps=4, enable_fp_fusion=False)
    return fp8.FP8Rows(codes, scale.rows, x.shape, x.dtype)


class StaticScale:
    """One per-tensor scale (amax of xs [M, K] / 448, times `margin`, as a calibration would set it) and its
    reciprocal, with the scale expanded over the M rows (stride 0) as FP8Rows carries row scales."""

    def __init__(self, xs: torch.Tensor, margin: float = 4.0):
        self.scale = (xs.abs().amax().float() * margin / FP8_MAX).reshape(1)
        self.inv = 1 / self.scale
        self.rows = self.scale.expand(xs.shape[0])


def layer_weights(seed: int):
    from tools.kernels.check_realtime_gpu import make_fp8

    def dequantized(layer) -> torch.Tensor:  # the fp16 weight an FP8 layer stands for: (x * inv_smooth) @ W^T
        return (layer.qweight.float() * layer.wscales[:, None] * layer.inv_smooth[None, :]).half()

    g = torch.Generator(device="cuda").manual_seed(seed)
    down, o = make_fp8(INTER, HIDDEN, seed=seed + 100), make_fp8(Q_DIM, HIDDEN, seed=seed + 200)
    return {"gate_up": make_fp8(HIDDEN, 2 * INTER, seed=seed), "down": down, "o": o,
            "down16": dequantized(down), "o16": dequantized(o),
            "norm": (1 + 0.1 * torch.randn(HIDDEN, device="cuda", generator=g)).half(),
            "qkv_inv_smooth": 1 / (0.5 + torch.rand(HIDDEN, device="cuda", generator=g))}


def chains(m: int, layers: list[dict]) -> tuple[dict, dict]:
    """(name -> fn(i) timed with weight set i, checks) at m rows."""
    g = torch.Generator(device="cuda").manual_seed(m)
    h = torch.randn(m, HIDDEN, device="cuda", generator=g).half()
    residual = (4 * torch.randn(m, HIDDEN, device="cuda", generator=g)).half()
    attn_out = torch.randn(m, Q_DIM, device="cuda", generator=g).half()
    w0 = layers[0]
    rows0, _ = add_rmsnorm_fp8(h, residual, w0["norm"], EPS, w0["gate_up"].inv_smooth)
    product = fp8.fp8_rows_product(rows0, w0["gate_up"].qweight, w0["gate_up"].wscales)
    scaled = {"row_scales": product.row_scales, "col_scales": product.col_scales, "out_dtype": torch.float16}
    act16 = swiglu_scaled(product.raw, **scaled)
    down_scale = StaticScale(act16.float() * w0["down"].inv_smooth)
    o_scale = StaticScale(attn_out.float() * w0["o"].inv_smooth)
    act_rows = swiglu_scaled_fp8(product.raw, **scaled, inv_smooth=w0["down"].inv_smooth)
    down_product = fp8.fp8_rows_product(act_rows, w0["down"].qweight, w0["down"].wscales)
    o_rows = fp8.FP8Rows(*fp8.quantize_act_fp8(attn_out, w0["o"].inv_smooth), attn_out.shape, attn_out.dtype)

    def head(i):  # post_attn_norm's add and gate_up, as Realtime runs them
        rows, res = add_rmsnorm_fp8(h, residual, layers[i]["norm"], EPS, layers[i]["gate_up"].inv_smooth)
        return fp8.fp8_rows_product(rows, layers[i]["gate_up"].qweight, layers[i]["gate_up"].wscales), res

    def tail(i, out, res):  # the next input norm's add
        return add_rmsnorm_fp8(out, res, layers[i]["norm"], EPS, layers[i]["qkv_inv_smooth"])

    def down8(i, rows):
        return fp8.fp8_rows_product(rows, layers[i]["down"].qweight, layers[i]["down"].wscales)

    def o8(i, rows):
        return fp8.fp8_rows_product(rows, layers[i]["o"].qweight, layers[i]["o"].wscales)

    def scales(p):
        return {"row_scales": p.row_scales, "col_scales": p.col_scales, "out_dtype": p.dtype}

    def mlp_fp16(i):
        p, res = head(i)
        return tail(i, F.linear(swiglu_scaled(p.raw, **scales(p)), layers[i]["down16"]), res)

    def mlp_fp8(i):
        p, res = head(i)
        return tail(i, down8(i, swiglu_scaled_fp8(p.raw, **scales(p), inv_smooth=layers[i]["down"].inv_smooth)), res)

    def mlp_fp8_separate(i):
        p, res = head(i)
        act = swiglu_scaled(p.raw, **scales(p))
        rows = fp8.FP8Rows(*fp8.quantize_act_fp8(act, layers[i]["down"].inv_smooth), act.shape, act.dtype)
        return tail(i, down8(i, rows), res)

    def mlp_static(i):
        p, res = head(i)
        return tail(i, down8(i, swiglu_static(p, layers[i]["down"].inv_smooth, down_scale)), res)

    def attn_fp16(i):
        return add_rmsnorm_fp8(F.linear(attn_out, layers[i]["o16"]), residual, layers[i]["norm"], EPS,
                               layers[i]["gate_up"].inv_smooth)

    def attn_fp8(i):
        rows = fp8.FP8Rows(*fp8.quantize_act_fp8(attn_out, layers[i]["o"].inv_smooth), attn_out.shape, attn_out.dtype)
        return add_rmsnorm_fp8(o8(i, rows), residual, layers[i]["norm"], EPS, layers[i]["gate_up"].inv_smooth)

    def attn_static(i):
        rows = quantize_static(attn_out, layers[i]["o"].inv_smooth, o_scale)
        return add_rmsnorm_fp8(o8(i, rows), residual, layers[i]["norm"], EPS, layers[i]["gate_up"].inv_smooth)

    found = {
        "MLP chain, fp16 down (today)": mlp_fp16,
        "MLP chain, FP8 down (swiglu_scaled_fp8)": mlp_fp8,
        "MLP chain, FP8 down, separate quantizer": mlp_fp8_separate,
        "MLP chain, FP8 down, CANDIDATE static scale": mlp_static,
        "attn-out chain, fp16 o_proj (today)": attn_fp16,
        "attn-out chain, FP8 o_proj (quantize_act_fp8)": attn_fp8,
        "attn-out chain, FP8 o_proj, CANDIDATE static scale": attn_static,
        "kernel add_rmsnorm_fp8 + gate_up product": lambda i: head(i),
        "kernel swiglu_scaled": lambda i: swiglu_scaled(product.raw, **scaled),
        "kernel swiglu_scaled_fp8": lambda i: swiglu_scaled_fp8(product.raw, **scaled,
                                                                inv_smooth=layers[i]["down"].inv_smooth),
        "kernel quantize_act_fp8 K=3072": lambda i: fp8.quantize_act_fp8(act16, layers[i]["down"].inv_smooth),
        "kernel CANDIDATE swiglu static": lambda i: swiglu_static(product, layers[i]["down"].inv_smooth, down_scale),
        "kernel down fp16 F.linear": lambda i: F.linear(act16, layers[i]["down16"]),
        "kernel down FP8 unit product": lambda i: down8(i, act_rows),
        "kernel add_rmsnorm_fp8 of fp16 x": lambda i: tail(i, h, residual),
        "kernel add_rmsnorm_fp8 of a product": lambda i: tail(i, down_product, residual),
        "kernel o_proj fp16 F.linear": lambda i: F.linear(attn_out, layers[i]["o16"]),
        "kernel quantize_act_fp8 K=2048": lambda i: fp8.quantize_act_fp8(attn_out, layers[i]["o"].inv_smooth),
        "kernel CANDIDATE quantize static K=2048": lambda i: quantize_static(attn_out, layers[i]["o"].inv_smooth,
                                                                             o_scale),
        "kernel o_proj FP8 unit product": lambda i: o8(i, o_rows),
    }

    codes, want_scales = fp8.quantize_act_fp8(act16, w0["down"].inv_smooth)
    static_down = swiglu_static(product, w0["down"].inv_smooth, down_scale)
    static_o = quantize_static(attn_out, w0["o"].inv_smooth, o_scale)

    def torch_static(x, inv_smooth, scale):
        return (x.float() * inv_smooth * scale.inv).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).view(torch.uint8)

    def distance(a, b):
        return ((a.float() - b.float()).norm() / b.float().norm()).item()

    want_res = mlp_fp16(0)[1]
    checks = {
        "swiglu_scaled_fp8 == quantize_act_fp8(swiglu_scaled)": torch.equal(act_rows.codes.view(torch.uint8),
                                                                            codes.view(torch.uint8))
        and torch.equal(act_rows.scales, want_scales),
        "candidate swiglu static == torch": torch.equal(static_down.codes.view(torch.uint8),
                                                         torch_static(act16, w0["down"].inv_smooth, down_scale)),
        "candidate quantize static == torch": torch.equal(static_o.codes.view(torch.uint8),
                                                           torch_static(attn_out, w0["o"].inv_smooth, o_scale)),
    }
    # the chains' sublayer output (new residual - residual) against the fp16 chain's, whose weights are the FP8
    # layers' dequantized: e4m3's error on the activation (~0.04 relative), not a broken chain
    for name, fn, want in (("MLP FP8 down", mlp_fp8, want_res), ("MLP FP8 down separate", mlp_fp8_separate, want_res),
                           ("MLP candidate static", mlp_static, want_res),
                           ("attn FP8 o_proj", attn_fp8, attn_fp16(0)[1]),
                           ("attn candidate static", attn_static, attn_fp16(0)[1])):
        checks[f"{name}: sublayer output's distance to the fp16 chain's <= 0.1"] = distance(fn(0)[1] - residual,
                                                                                             want - residual)
    return found, checks


def failures(checks: dict) -> list[str]:
    return [name for name, ok in checks.items() if (ok > 0.1 if isinstance(ok, float) else not ok)]


def model_steps(rows: list[int]) -> dict:
    """ms per model step (one forward of `rows` packed rows from a CUDA graph) and 1 - logit cosine to fp16, per
    MODEL_CHOICES entry, on a random full-size LM."""
    from engine.config import ModelConfig
    from engine.lm.model import KeyRanges, OmniVoiceLM
    from engine.quant import quantize_
    from engine.quant.realtime import fp8_config, synthetic_calibration

    cfg = ModelConfig()
    torch.manual_seed(0)

    def fresh() -> OmniVoiceLM:
        with torch.device("cuda"):
            return OmniVoiceLM(cfg).half().eval()

    state = fresh().state_dict()
    out = {}
    for m in rows:
        g = torch.Generator(device="cuda").manual_seed(m)
        ids = torch.randint(0, cfg.audio_mask_id, (1, cfg.num_codebooks, m), device="cuda", generator=g)
        audio_mask = (torch.arange(m, device="cuda") >= m // 4)[None]
        ids[:, :, : m // 4] = torch.randint(0, 1000, (1, 1, m // 4), device="cuda", generator=g)
        ids = torch.where((torch.rand(1, 1, m, device="cuda", generator=g) < 0.5) & audio_mask[:, None],
                          cfg.audio_mask_id, ids)
        ranges = KeyRanges(torch.zeros(m, dtype=torch.int32, device="cuda"),
                           torch.full((m,), m, dtype=torch.int32, device="cuda"))
        out[m] = {"ids": ids, "audio_mask": audio_mask, "ranges": ranges,
                  "rows": torch.arange(m // 2, m, device="cuda")}
    results = {m: {} for m in rows}
    reference = {}
    for name, linears in MODEL_CHOICES.items():
        lm = fresh()
        lm.load_state_dict(state)
        if linears is not None:
            with torch.no_grad():
                quantize_(lm, fp8_config(linears), synthetic_calibration)
        lm.use_fused_kernels()
        for m in rows:
            data = out[m]

            def step(lm=lm, data=data):
                return lm(data["ids"], data["audio_mask"], data["ranges"], rows=data["rows"])

            with torch.inference_mode():
                logits = step().float()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    step()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    step()
                times = []
                for _ in range(20):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    graph.replay()
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))
            reference.setdefault(m, logits)
            cos = F.cosine_similarity(logits.flatten(), reference[m].flatten(), dim=0).item()
            results[m][name] = {"ms": statistics.median(times), "one_minus_cos": 1 - cos}
            print(f"model step M {m}: {name}: {results[m][name]['ms']:.3f} ms, 1 - logit cos to fp16 "
                  f"{1 - cos:.2e}", flush=True)
            del graph
        del lm
        torch.cuda.empty_cache()
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS), help="M values (default: %(default)s)")
    parser.add_argument("--model-rows", type=int, nargs="*", default=list(MODEL_ROWS),
                        help="M values of the whole model's step (default: %(default)s; none: skip it)")
    parser.add_argument("--json", help="also write the header, checks and timings here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_fp8_layer needs a CUDA GPU", file=sys.stderr)
        return 2
    from tools.kernels.check_realtime_gpu import COPIES, graph_us

    start = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    header = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "commit": commit_id(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "weights": "random", "command": "python -m tools.kernels.bench_fp8_layer " + " ".join(argv)}
    print(json.dumps(header))
    layers = [layer_weights(seed) for seed in range(COPIES)]
    report = {"header": header, "checks": {}, "us": {}, "model": {}}
    failed = False
    for m in args.rows:
        with torch.inference_mode():
            found, checks = chains(m, layers)
            report["checks"][m] = checks
            for name, ok in checks.items():
                print(f"M {m}: check {name}: {ok}")
            if failures(checks):
                print(f"M {m}: FAILED: {failures(checks)}", file=sys.stderr)
                failed = True
                continue
            times = {name: graph_us(fn) for name, fn in found.items()}
        report["us"][m] = times
        for name, us in times.items():
            base = "MLP chain, fp16 down (today)" if name.startswith("MLP") else "attn-out chain, fp16 o_proj (today)"
            share = f"  ({us / times[base]:.3f} x today's)" if "chain" in name else ""
            print(f"M {m}: {name}: {us:.2f} us{share}", flush=True)
    write(report, args.json)  # the layer's figures even if the model's step runs out of time
    if args.model_rows and not failed:
        report["model"] = model_steps(args.model_rows)
        write(report, args.json)
    print(f"{time.time() - start:.0f} s")
    return 1 if failed else 0


def write(report: dict, path: str | None) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
