"""down_proj in W8A8 int8 with its own kernels against fp16: `python -m tools.kernels.bench_int8_down [--rows M ...]
[--json PATH]` (GPU only).

At down_proj's shape (SwiGLU of a [M, 2 x 3072] gate_up, then 3072 -> 1024) and M = 256 / 896 / 1024 rows, us per
call replayed from a CUDA graph with 8 weight sets in turn (`check_realtime_gpu.graph_us`), these chains:
- fp16: `swiglu` + `F.linear` (cuBLAS fp16; what High fidelity and the W4A4 recipe's down_proj-FP16 run);
- int8 fused: `swiglu_int8` (SwiGLU writing int8 codes + row scales) + `int8_gemm` (its default tile; and each tile
  of `GEMM_TILES` and `EXTRA_TILES` alone);
- int8 separate: `swiglu` + `W8A8Linear` on its Triton backend (`quantize_act_int8` + `int8_gemm`);
- int8 torch: `swiglu` + `W8A8Linear` on the reference backend (the plain-PyTorch chain around `torch._int_mm`,
  what every W8A8 down_proj ran before kernels/int8.py);
and each chain's kernels alone (swiglu_int8 also at 4 and 16 warps). Prints what fraction of fp16's time each int8
chain takes. Also a candidate that is NOT the contract: swiglu_int8 dividing nothing per element (x * (1 / smooth),
each value * (1 / scale), as kernels/fp8.py's quantizer since 00fe5ea), alone and in the fused chain; its codes are
checked against the same arithmetic in torch, and how many differ from the contract's (at ties, one step) is printed.

Checked first, on the same operands (exit status 1 and no timings if any check fails): every int8 chain's output
bit for bit equal to the reference backend's (each GEMM tile too), `swiglu_int8`'s codes and scales equal to the
reference quantizer of `swiglu`'s output, and the fp16 chain within fp16 rounding of the fp32 product of the same
fp16 activation (`kernels.numerics.fp16_rounding_ratio` <= 1, with bench_fp8_scaling's allowance for cuBLAS's
fp32 sum and fp16 split-K partials). RANDOM weights and activations: say so where the
figures are used. Well under a minute on an H200.

This answers the H200 half (int8 tensor cores are native there too). The users' Realtime runs W4A4 on INT4 tensor
cores (L4 / RTX 30/40): whether W8A8 down_proj pays there is this chain against W4A4's quantize + INT4 GEMM
(`kernels.w4a4_cuda`), which needs an Ada GPU (sm_89).
"""
import argparse
import json
import sys
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from engine.quant import QuantConfig, W8A8Linear
from kernels import int8
from kernels import swiglu as swiglu_module
from kernels._triton import round_half_even, tl, triton
from kernels.fp8_ref import SMALLEST_SCALE
from kernels.int8_ref import INT8_MAX, quantize_rows_int8_ref
from kernels.numerics import fp16_rounding_ratio, ieee_div, ieee_reciprocal
from kernels.row_quant import clamped_product, row_scale_reciprocal, smoothed_by_reciprocals
from kernels.swiglu import swiglu, swiglu_int8
from tools.kernels.bench_fp8_scaling import FP16_PARTIALS
from tools.provenance import commit_id

HIDDEN, INTER = 1024, 3072
ROWS = (256, 896, 1024)
COPIES = 8  # weight sets cycled through while timing (check_realtime_gpu.graph_us's)
SWIGLU_WARPS = (4, 16)  # swiglu_int8 at other warp counts than its wrapper's (kernels.swiglu.SWIGLU_INT8_WARPS)
EXTRA_TILES = {  # GEMM launch options beside kernels.int8.GEMM_TILES: smaller tiles and deeper K steps for small M
    "128x64 k128": {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
    "64x64 k256": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
    "32x64 k256": {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
    "32x32 k256": {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 256, "num_warps": 2, "num_stages": 3},
    "16x64 k256": {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3},
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=list(ROWS), help="M values (default: %(default)s)")
    parser.add_argument("--json", help="also write the header, checks and timings here")
    args = parser.parse_args(argv)
    if any(m < 1 for m in args.rows):
        parser.error(f"--rows must be positive, got {args.rows}")
    return args


def make_layers(device: str, copies: int, *, inter: int = INTER, hidden: int = HIDDEN) -> list[SimpleNamespace]:
    """`copies` down_proj weight sets: fp16 W [hidden, inter] and the same W as two W8A8Linear (Triton backend, and
    the reference), calibrated on random activations' channel maxima with a few outlier channels."""
    layers = []
    for c in range(copies):
        g = torch.Generator(device=device).manual_seed(c)
        linear = torch.nn.Linear(inter, hidden, bias=False, device=device, dtype=torch.float16)
        with torch.no_grad():
            linear.weight.copy_(0.02 * torch.randn(hidden, inter, device=device, generator=g))
        amax = 0.5 + torch.rand(inter, device=device, generator=g)
        amax[:: inter // 8] *= 20
        fast, ref = (W8A8Linear.from_linear(linear, amax, QuantConfig()) for _ in range(2))
        fast.backend, ref.backend = "triton", "ref"
        layers.append(SimpleNamespace(weight=linear.weight.detach(), fast=fast, ref=ref,
                                      inv_smooth=ieee_reciprocal(fast.smooth)))
    return layers


def make_gate_up(m: int, device: str, *, inter: int = INTER, seed: int = 0) -> torch.Tensor:
    """[m, 2 inter] fp16 gate and up halves of a random activation, with one all-zero row (the last)."""
    g = torch.Generator(device=device).manual_seed(1000 + seed)
    gate_up = 2 * torch.randn(m, 2 * inter, device=device, generator=g)
    gate_up[-1] = 0
    return gate_up.half()


def swiglu_int8_warps(gate_up: torch.Tensor, smooth: torch.Tensor, num_warps: int) -> int8.Int8Rows:
    """`swiglu_int8` launched with `num_warps` warps per row."""
    m, n_cols = gate_up.shape[0], gate_up.shape[1] // 2
    rows = int8.new_int8_rows(torch.Size((m, n_cols)), gate_up.dtype, gate_up.device)
    swiglu_module._swiglu_int8_kernel[(m,)](gate_up, smooth, rows.codes, rows.scales, gate_up.stride(0), n_cols,
                                            SLICE=swiglu_module._slice(n_cols), num_warps=num_warps,
                                            enable_fp_fusion=False)
    return rows


def gemm_tiles(device: torch.device) -> dict[str, str | dict]:
    """name -> `int8_gemm`'s tile argument: every tile of GEMM_TILES for this device, and EXTRA_TILES on a GPU."""
    if device.type != "cuda":
        return {"interpreter": "interpreter"}
    return {tile: tile for tile in int8.GEMM_TILES if tile != "interpreter"} | EXTRA_TILES


@triton.jit
def _reciprocal_slice(gate_up_ptr, inv_smooth_ptr, stride, n_cols, row, cols, mask):
    gate = tl.load(gate_up_ptr + row * stride + cols, mask=mask, other=0.0)
    up = tl.load(gate_up_ptr + row * stride + n_cols + cols, mask=mask, other=0.0)
    act = swiglu_module.silu_mul(gate, up).to(gate.dtype).to(tl.float32)
    return smoothed_by_reciprocals(act, inv_smooth_ptr, cols, mask)


@triton.jit
def _store_reciprocal_codes(xs, inv_scale, codes_row_ptr, cols, mask):
    q = round_half_even(clamped_product(xs, inv_scale, 127.0))
    tl.store(codes_row_ptr + cols, q.to(tl.int8), mask=mask)


@triton.jit
def _swiglu_int8_reciprocal_kernel(gate_up_ptr, inv_smooth_ptr, codes_ptr, scales_ptr, stride, n_cols,
                                   SMALLEST: tl.constexpr, SLICE: tl.constexpr):
    """swiglu_int8's three slices, multiplying by reciprocals where it divides."""
    row = tl.program_id(0).to(tl.int64)
    c0 = tl.arange(0, SLICE)
    c1 = c0 + SLICE
    c2 = c1 + SLICE
    m0, m1, m2 = c0 < n_cols, c1 < n_cols, c2 < n_cols
    x0 = _reciprocal_slice(gate_up_ptr, inv_smooth_ptr, stride, n_cols, row, c0, m0)
    x1 = _reciprocal_slice(gate_up_ptr, inv_smooth_ptr, stride, n_cols, row, c1, m1)
    x2 = _reciprocal_slice(gate_up_ptr, inv_smooth_ptr, stride, n_cols, row, c2, m2)
    amax = tl.maximum(tl.maximum(tl.max(tl.abs(x0), axis=0), tl.max(tl.abs(x1), axis=0)), tl.max(tl.abs(x2), axis=0))
    scale, inv_scale = row_scale_reciprocal(amax, 127.0, SMALLEST)
    _store_reciprocal_codes(x0, inv_scale, codes_ptr + row * n_cols, c0, m0)
    _store_reciprocal_codes(x1, inv_scale, codes_ptr + row * n_cols, c1, m1)
    _store_reciprocal_codes(x2, inv_scale, codes_ptr + row * n_cols, c2, m2)
    tl.store(scales_ptr + row + tl.arange(0, 1), scale)


def swiglu_int8_reciprocal(gate_up: torch.Tensor, inv_smooth: torch.Tensor) -> int8.Int8Rows:
    """The candidate: `swiglu_int8` with x * inv_smooth and each value * (1 / scale) instead of divisions."""
    m, n_cols = gate_up.shape[0], gate_up.shape[1] // 2
    rows = int8.new_int8_rows(torch.Size((m, n_cols)), gate_up.dtype, gate_up.device)
    _swiglu_int8_reciprocal_kernel[(m,)](gate_up, inv_smooth, rows.codes, rows.scales, gate_up.stride(0), n_cols,
                                         SMALLEST=SMALLEST_SCALE, SLICE=swiglu_module._slice(n_cols),
                                         num_warps=swiglu_module.SWIGLU_INT8_WARPS, enable_fp_fusion=False)
    return rows


def reciprocal_rows_ref(act: torch.Tensor, inv_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The candidate's arithmetic in torch (as kernels/fp8_ref.py's, with int8's grid): codes and scales."""
    xs = act.float() * inv_smooth
    scales = ieee_div(xs.abs().amax(dim=1), INT8_MAX)
    inv = ieee_reciprocal(torch.where(scales >= SMALLEST_SCALE, scales, torch.ones_like(scales)))
    codes = torch.round((xs * inv[:, None]).clamp(-INT8_MAX, INT8_MAX)).to(torch.int8)
    return codes, scales


def check(gate_up: torch.Tensor, layer: SimpleNamespace, tiles: dict[str, str | dict]) -> dict[str, bool | float]:
    """Each check's result on these operands (True / a ratio that must be <= 1)."""
    act = swiglu(gate_up)  # [M, I] fp16
    with torch.inference_mode():
        want = layer.ref(act)  # the reference backend: plain PyTorch
        rows = swiglu_int8(gate_up, layer.fast.smooth)
        codes, scales = quantize_rows_int8_ref(act.float() / layer.fast.smooth)
        results = {"swiglu_int8 codes and scales == reference quantizer":
                   torch.equal(rows.codes, codes) and torch.equal(rows.scales, scales),
                   "int8 separate (W8A8Linear triton) == reference": torch.equal(layer.fast(act), want),
                   "int8 fused (Int8Rows handed over) == reference": torch.equal(layer.fast(rows), want)}
        for name, tile in tiles.items():
            y = int8.int8_gemm(rows, layer.fast.qweight, layer.fast.wscales, tile=tile)
            results[f"int8 gemm {name} == reference"] = torch.equal(y, want)
        candidate = swiglu_int8_reciprocal(gate_up, layer.inv_smooth)
        want_codes, want_scales = reciprocal_rows_ref(act, layer.inv_smooth)
        results["candidate swiglu_int8 by reciprocals == its torch arithmetic"] = (
            torch.equal(candidate.codes, want_codes) and torch.equal(candidate.scales, want_scales))
        steps = (candidate.codes.int() - codes.int()).abs()
        print(f"candidate by reciprocals: {int((steps > 0).sum())} of {steps.numel()} codes differ from the contract's,"
              f" by at most {int(steps.max())} step(s); scales equal: {torch.equal(candidate.scales, scales)}")
        for warps in SWIGLU_WARPS:
            other = swiglu_int8_warps(gate_up, layer.fast.smooth, warps)
            results[f"swiglu_int8 num_warps {warps} == swiglu_int8"] = (torch.equal(other.codes, rows.codes)
                                                                        and torch.equal(other.scales, rows.scales))
        ref32 = act.float() @ layer.weight.float().t()
        # what cuBLAS may lose before the output's rounding: K fp32 roundings, FP16_PARTIALS fp16 split-K partials
        magnitude = act.float().abs() @ layer.weight.float().abs().t()  # sum |x w| per output
        slack = (act.shape[1] * 2.0 ** -24 + FP16_PARTIALS * 2.0 ** -11) * magnitude
        results["fp16 chain: fp16 rounding ratio"] = fp16_rounding_ratio(F.linear(act, layer.weight), ref32,
                                                                         ref32.half(), slack)
    return results


def failures(results: dict[str, bool | float]) -> list[str]:
    return [name for name, ok in results.items() if (ok > 1 if isinstance(ok, float) else not ok)]


def chains(gate_up: torch.Tensor, layers: list[SimpleNamespace], tiles: dict[str, str | dict]) -> dict:
    """name -> fn(i) running that chain (or kernel) with weight set i."""
    act = swiglu(gate_up)
    rows = swiglu_int8(gate_up, layers[0].fast.smooth)
    found = {
        "fp16: swiglu + F.linear": lambda i: F.linear(swiglu(gate_up), layers[i].weight),
        "int8 fused: swiglu_int8 + int8_gemm": lambda i: layers[i].fast(swiglu_int8(gate_up, layers[i].fast.smooth)),
        "int8 separate: swiglu + quantize_act_int8 + int8_gemm": lambda i: layers[i].fast(swiglu(gate_up)),
        "int8 torch: swiglu + W8A8Linear reference chain": lambda i: layers[i].ref(swiglu(gate_up)),
        "kernel swiglu": lambda i: swiglu(gate_up),
        "kernel swiglu_int8": lambda i: swiglu_int8(gate_up, layers[i].fast.smooth),
        "kernel quantize_act_int8": lambda i: int8.quantize_act_int8(act, layers[i].fast.smooth),
        "kernel F.linear fp16": lambda i: F.linear(act, layers[i].weight),
    }
    found["candidate int8 fused by reciprocals: swiglu_int8_reciprocal + int8_gemm"] = lambda i: layers[i].fast(
        swiglu_int8_reciprocal(gate_up, layers[i].inv_smooth))
    found["kernel candidate swiglu_int8_reciprocal"] = lambda i: swiglu_int8_reciprocal(gate_up, layers[i].inv_smooth)
    for warps in SWIGLU_WARPS:
        found[f"kernel swiglu_int8 num_warps {warps}"] = lambda i, warps=warps: swiglu_int8_warps(
            gate_up, layers[i].fast.smooth, warps)
    for name, tile in tiles.items():
        found[f"kernel int8_gemm {name}"] = lambda i, tile=tile: int8.int8_gemm(
            rows, layers[i].fast.qweight, layers[i].fast.wscales, tile=tile)
    return found


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_int8_down needs a CUDA GPU", file=sys.stderr)
        return 2
    from tools.kernels.check_realtime_gpu import graph_us

    header = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "commit": commit_id(), "weights": "random"}
    print(json.dumps(header))
    tiles = gemm_tiles(torch.device("cuda"))
    layers = make_layers("cuda", COPIES)
    report = {"header": header, "checks": {}, "us": {}}
    for m in args.rows:
        gate_up = make_gate_up(m, "cuda", seed=m)
        results = check(gate_up, layers[0], tiles)
        report["checks"][m] = results
        for name, ok in results.items():
            print(f"M {m}: check {name}: {ok}")
        if failures(results):
            print(f"M {m}: FAILED: {failures(results)}", file=sys.stderr)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(report, f, indent=1)
            return 1
    for m in args.rows:
        gate_up = make_gate_up(m, "cuda", seed=m)
        auto = int8.gemm_tile(m, HIDDEN, gate_up.device)
        with torch.inference_mode():
            times = {name: graph_us(fn) for name, fn in chains(gate_up, layers, tiles).items()}
        report["us"][m] = {"default tile": auto, **times}
        fp16 = times["fp16: swiglu + F.linear"]
        for name, us in times.items():
            share = f"  ({us / fp16:.2f} x fp16's chain)" if not name.startswith("kernel") else ""
            print(f"M {m}: {name}: {us:.2f} us{share}", flush=True)
        print(f"M {m}: int8_gemm's default tile here: {auto}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
