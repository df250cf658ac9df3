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
- CANDIDATES outside the contract (`tools/kernels/fp8_candidates.py`), whose quantizers need no reduction over a
  whole row and run tiled like the SwiGLU: one static per-tensor scale (a calibrated one would take its place; the
  GEMM stays unit-scale), and 1 x 128 activation blocks with 128 x 128 weight blocks scaled inside the GEMM (fp16
  out, a plain tensor for the norm): what such scales would be worth, not whether their numerics hold on real weights;
Then the whole model's step at --model-rows: a random full-size LM (fp16, `ModelConfig()`), converted by
`engine.quant.realtime.fp8_config` for each choice of FP8 linears in MODEL_CHOICES, fused kernels on, one forward of
M packed rows (one sequence, logits of the last half) replayed from a CUDA graph, ms per step, with 1 - cosine of
its logits against the fp16 model's (random weights: the figure says how far the choice moves the output, not
what real weights do).

Checked first (exit status 1 if any fails): swiglu_scaled_fp8's codes and scales bit for bit quantize_act_fp8 of
swiglu_scaled's output; the candidates' codes and scales equal the same arithmetic in torch; each FP8 chain's sublayer
output within DISTANCE (0.1, relative Frobenius) of the fp16 chain's, whose weights are the FP8 ones dequantized (e4m3
on the activation gives ~0.03). A GPU whose `_scaled_mm` refuses block scales gets the rest. Well under two minutes
on an H200. cuBLASLt gets no workspace unless the environment names one, as `Engine.load` does
(`engine.lm.modes.settle_cublaslt_workspace`: no memset before each FP8 GEMM).
"""
import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from kernels import fp8
from kernels._triton import triton
from kernels.fp8_ref import quantize_rows_fp8_ref
from kernels.numerics import ieee_reciprocal
from kernels.rmsnorm import add_rmsnorm_fp8
from kernels.swiglu import swiglu_scaled, swiglu_scaled_fp8
from tools.kernels.bench_fp8_scaling import refusal
from tools.kernels.fp8_candidates import (
    GROUP,
    StaticScale,
    block_gemm,
    block_weight,
    blocks_ref,
    quantize_blocks,
    quantize_static,
    static_ref,
    swiglu_blocks,
    swiglu_static,
)
from tools.provenance import commit_id

ROWS = (256, 320, 896, 1792)
MODEL_ROWS = (320, 896)  # a 3 s output's bucket and the baseline's
EPS = 1e-6
COPIES = 8  # weight sets cycled through while timing (check_realtime_gpu.graph_us's)
MODEL_CHOICES = {  # name -> the FP8 linears (fp8_config's argument); None: the fp16 model (High fidelity's linears)
    "fp16": None,
    "today (qkv, gate_up)": ("*.qkv_proj", "*.gate_up_proj"),
    "+ down": ("*.qkv_proj", "*.gate_up_proj", "*.down_proj"),
    "+ o_proj": ("*.qkv_proj", "*.gate_up_proj", "*.o_proj"),
    "all four": ("*.qkv_proj", "*.o_proj", "*.gate_up_proj", "*.down_proj"),
}


@dataclass(frozen=True)
class Sizes:
    hidden: int = 1024
    inter: int = 3072
    q_dim: int = 2048  # o_proj's input: heads x head_dim


def make_fp8(k: int, n: int, seed: int, device: str) -> SimpleNamespace:
    """An FP8 layer [N, K] of random weights 0.05 N(0, 1), rowwise e4m3, smoothing factors in [0.5, 1.5)."""
    g = torch.Generator(device=device).manual_seed(seed)
    codes, scales = quantize_rows_fp8_ref(0.05 * torch.randn(n, k, device=device, generator=g))
    return SimpleNamespace(inv_smooth=ieee_reciprocal(0.5 + torch.rand(k, device=device, generator=g)), qweight=codes,
                           wscales=scales)


def layer_weights(seed: int, device: str, sizes: Sizes = Sizes()) -> dict:
    """One layer's weights: FP8 gate_up, down, o_proj; fp16 down and o_proj equal to the FP8 ones dequantized (so
    the chains differ by the activations' quantization only) and, where whole 128 x 512 blocks tile them, the same
    in 128 x 128 blocks (the block candidate's); the norm's weight and qkv's smoothing reciprocals."""

    def dequantized(layer) -> torch.Tensor:  # the fp16 weight an FP8 layer stands for: (x * inv_smooth) @ W^T
        return (layer.qweight.float() * layer.wscales[:, None] * layer.inv_smooth[None, :]).half()

    def blocks(w: torch.Tensor):
        return block_weight(w) if w.shape[0] % GROUP == 0 and w.shape[1] % (4 * GROUP) == 0 else None

    g = torch.Generator(device=device).manual_seed(seed)
    down = make_fp8(sizes.inter, sizes.hidden, seed + 100, device)
    o = make_fp8(sizes.q_dim, sizes.hidden, seed + 200, device)
    down16, o16 = dequantized(down), dequantized(o)
    return {"gate_up": make_fp8(sizes.hidden, 2 * sizes.inter, seed, device), "down": down, "o": o,
            "down16": down16, "o16": o16, "down_blocks": blocks(down16), "o_blocks": blocks(o16),
            "norm": (1 + 0.1 * torch.randn(sizes.hidden, device=device, generator=g)).half(),
            "qkv_inv_smooth": ieee_reciprocal(0.5 + torch.rand(sizes.hidden, device=device, generator=g))}


def chains(m: int, layers: list[dict]) -> tuple[dict, dict]:
    """(name -> fn(i) timed with weight set i, checks) at m rows, on the layers' device and sizes."""
    w0 = layers[0]
    device = w0["norm"].device
    hidden, q_dim = w0["o"].qweight.shape
    g = torch.Generator(device=device).manual_seed(m)
    h = torch.randn(m, hidden, device=device, generator=g).half()
    residual = (4 * torch.randn(m, hidden, device=device, generator=g)).half()
    attn_out = torch.randn(m, q_dim, device=device, generator=g).half()
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

    def post_attn(i, out):  # post_attn_norm's add
        return add_rmsnorm_fp8(out, residual, layers[i]["norm"], EPS, layers[i]["gate_up"].inv_smooth)

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

    def mlp_blocks(i):
        p, res = head(i)
        return tail(i, block_gemm(*swiglu_blocks(p), layers[i]["down_blocks"]), res)

    def attn_fp8(i):
        rows = fp8.FP8Rows(*fp8.quantize_act_fp8(attn_out, layers[i]["o"].inv_smooth), attn_out.shape, attn_out.dtype)
        return post_attn(i, o8(i, rows))

    found = {
        "MLP chain, fp16 down (today)": mlp_fp16,
        "MLP chain, FP8 down (swiglu_scaled_fp8)": mlp_fp8,
        "MLP chain, FP8 down, separate quantizer": mlp_fp8_separate,
        "MLP chain, FP8 down, CANDIDATE static scale": mlp_static,
        "attn-out chain, fp16 o_proj (today)": lambda i: post_attn(i, F.linear(attn_out, layers[i]["o16"])),
        "attn-out chain, FP8 o_proj (quantize_act_fp8)": attn_fp8,
        "attn-out chain, FP8 o_proj, CANDIDATE static scale": lambda i: post_attn(
            i, o8(i, quantize_static(attn_out, layers[i]["o"].inv_smooth, o_scale))),
        "kernel add_rmsnorm_fp8 + gate_up product": head,
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

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))

    def distance(fn, want) -> float:  # of the sublayer outputs (new residual - residual), relative
        got, want = fn(0)[1].float() - residual.float(), want[1].float() - residual.float()
        return ((got - want).norm() / want.norm()).item()

    codes, want_scales = fp8.quantize_act_fp8(act16, w0["down"].inv_smooth)
    checks = {
        "swiglu_scaled_fp8 == quantize_act_fp8(swiglu_scaled)": same(act_rows.codes, codes)
        and torch.equal(act_rows.scales, want_scales),
        "candidate swiglu static == torch": same(swiglu_static(product, w0["down"].inv_smooth, down_scale).codes,
                                                 static_ref(act16, w0["down"].inv_smooth, down_scale)),
        "candidate quantize static == torch": same(quantize_static(attn_out, w0["o"].inv_smooth, o_scale).codes,
                                                   static_ref(attn_out, w0["o"].inv_smooth, o_scale)),
    }
    # each chain's sublayer output against the fp16 chain's, whose weights are the FP8 layers' dequantized: e4m3's
    # error on the activation (~0.04 relative at most), not a broken chain
    mlp_want, attn_want = mlp_fp16(0), found["attn-out chain, fp16 o_proj (today)"](0)
    for name in [name for name in found if "chain" in name and "today" not in name]:
        want = mlp_want if name.startswith("MLP") else attn_want
        checks[f"{name}: distance to fp16's <= {DISTANCE}"] = distance(found[name], want)
    if w0["down_blocks"] is None or w0["o_blocks"] is None:
        return found, checks  # the sizes are not whole weight blocks
    codes, block_scales = swiglu_blocks(product)
    want_codes, want_block_scales = blocks_ref(act16)
    checks["candidate swiglu blocks == torch"] = (same(codes, want_codes)
                                                  and torch.equal(block_scales, want_block_scales))
    codes, block_scales = quantize_blocks(attn_out)
    want_codes, want_block_scales = blocks_ref(attn_out)
    checks["candidate quantize blocks == torch"] = (same(codes, want_codes)
                                                    and torch.equal(block_scales, want_block_scales))
    block_chains = {
        "MLP chain, FP8 down, CANDIDATE 1x128 blocks": mlp_blocks,
        "attn-out chain, FP8 o_proj, CANDIDATE 1x128 blocks": lambda i: post_attn(
            i, block_gemm(*quantize_blocks(attn_out), layers[i]["o_blocks"])),
        "kernel CANDIDATE swiglu blocks": lambda i: swiglu_blocks(product),
        "kernel CANDIDATE quantize blocks K=2048": lambda i: quantize_blocks(attn_out),
        "kernel down block GEMM": lambda i: block_gemm(*swiglu_blocks(product), layers[i]["down_blocks"]),
        "kernel o_proj block GEMM": lambda i: block_gemm(*quantize_blocks(attn_out), layers[i]["o_blocks"]),
    }
    try:
        for name, want in (("MLP chain, FP8 down, CANDIDATE 1x128 blocks", mlp_want),
                           ("attn-out chain, FP8 o_proj, CANDIDATE 1x128 blocks", attn_want)):
            checks[f"{name}: distance to fp16's <= {DISTANCE}"] = distance(block_chains[name], want)
    except (RuntimeError, ValueError, NotImplementedError) as e:  # block-scaled _scaled_mm refused here
        checks["block-scaled _scaled_mm"] = f"refused: {refusal(e)}"
        return found, checks
    return found | block_chains, checks


DISTANCE = 0.1


def failures(checks: dict) -> list[str]:
    """The checks that failed: False, or a distance past DISTANCE (a refusal is reported, not failed)."""
    return [name for name, ok in checks.items()
            if (ok > DISTANCE if isinstance(ok, float) else ok is not True and not str(ok).startswith("refused"))]


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
    from engine.lm.modes import CUBLASLT_WORKSPACE_ENV, settle_cublaslt_workspace
    from tools.kernels.check_realtime_gpu import graph_us

    settle_cublaslt_workspace()  # before the first GEMM: the FP8 chains timed as the engine runs them
    start = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    header = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "commit": commit_id(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "weights": "random", "cublaslt_workspace_kib": os.environ[CUBLASLT_WORKSPACE_ENV],
              "command": "python -m tools.kernels.bench_fp8_layer " + " ".join(argv)}
    print(json.dumps(header))
    layers = [layer_weights(seed, "cuda") for seed in range(COPIES)]
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
