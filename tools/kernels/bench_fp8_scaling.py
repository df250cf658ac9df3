"""Which FP8 GEMM scalings run fast at the LM's linears: `python -m tools.kernels.bench_fp8_scaling [--json PATH]`.

Per linear (o_proj, down, qkv, gate_up) at M = 320 and 896 rows, us per GEMM replayed from a CUDA graph with
8 weight sets in turn (`check_realtime_gpu.graph_us`), operands already quantized (the GEMM alone):
- fp16: torch.mm of fp16 operands (what HiFi runs);
- unit bf16: `torch._scaled_mm` of per-row e4m3 codes with unit scales, bf16 out (realtime's FP8Product);
- rowwise fp16: the same codes with their per-row scales applied inside, fp16 out;
- block fp16 / block bf16: DeepSeek-V3's recipe, activations 1 x 128 blocks along K, weights 128 x 128 blocks
  (`torch._scaled_mm`, ScalingType pair BlockWise1x128 x BlockWise128x128); block v2 the same through
  `torch.nn.functional.scaled_mm`; block 1x128w: weights in 1 x 128 blocks too.
What torch offers, read from the sources (aten/src/ATen/native/cuda/ScaledBlas.cpp of a recent PyTorch main,
torch/_meta_registrations.py of 2.13; this run says what 2.11 does): cuBLASLt block scaling
(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F and BLK128x128_32F), sm_90 only ("DeepSeek style (1x128, 128x128)
scaling only supported in CUDA for SM90"), cuBLASLt >= 12.9; fp32 scales; activation scales [M, K/128]
M-major (strides (1, M)); 128 x 128 weight scales [K/128, N/128] with strides (1, K/128) (v2: leading
dimension K/128 rounded up to 4; the same for every K here).
The layouts: `act_block_scales` and friends. A variant torch or the GPU refuses is reported with its error.

Each variant is checked on its first CHECK_ROWS rows against float64 sums of the same quantized operands:
|y - exact| <= slack + half an ulp of the output dtype at |exact| + slack, where slack is what the arithmetic
may lose before that rounding: for FP8, `kernels.fp8_ref.fp8_sum_and_bound` per 128-product run (the MMA
accumulator, `kernels.fp8.accumulator_bits`), times that run's scales, plus an fp32 rounding of the sum of
|scaled runs| per run; for fp16, K fp32 roundings of sum |x w| (the worst case of an fp32 accumulator) plus
FP16_PARTIALS fp16 roundings of it (split-K partials: torch lets cuBLAS reduce them in fp16 by default).
Random operands (x ~ N(0, 1), w ~ 0.05 N(0, 1)): say so where figures are used. Well under 60 s on an H200.
"""
import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernels.fp8 import unit_scale
from kernels.fp8_ref import FP8_DTYPE, FP8_MAX, FP8_PROMOTION_K, fp8_sum_and_bound, quantize_rows_fp8_ref
from kernels.numerics import ieee_div
from tools.provenance import commit_id

SHAPES = (("o_proj", 2048, 1024), ("down", 3072, 1024), ("qkv", 1024, 4096), ("gate_up", 1024, 6144))  # name, K, N
ROWS = (320, 896)
BLOCK = 128  # the block edge of DeepSeek-V3's recipe, cuBLASLt's VEC128 / BLK128x128 scale modes
CHECK_ROWS = 128
COPIES = 8  # weight sets cycled through while timing (check_realtime_gpu.graph_us's)
FP16_PARTIALS = 8  # split-K partial sums cuBLAS may round to fp16 (torch allows reduced-precision reductions)


def quantize_blocks(t: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 codes [R, C] and fp32 scales [R / rows, C / cols] (amax / 448 per block, fp32, IEEE division; a zero
    block gets scale 0 and codes 0) of a 2-D tensor whose sides the block divides."""
    r, c = t.shape
    if r % rows or c % cols:
        raise ValueError(f"blocks {rows} x {cols} do not tile {r} x {c}")
    blocks = t.float().reshape(r // rows, rows, c // cols, cols)
    scales = ieee_div(blocks.abs().amax(dim=(1, 3)), FP8_MAX)  # [R / rows, C / cols]
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))[:, None, :, None]
    codes = (blocks / safe).clamp_(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).reshape(r, c)
    return codes, scales


def expand_scales(scales: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Block scales [R / rows, C / cols] repeated over each block: [R, C] float64."""
    return scales.double().repeat_interleave(rows, dim=0).repeat_interleave(cols, dim=1)


def act_block_scales(scales: torch.Tensor) -> torch.Tensor:
    """1 x 128 activation scales [M, K/128] as `_scaled_mm` takes them: the same shape, M-major (strides (1, M))."""
    return scales.t().contiguous().t()


def weight_block_scales(scales: torch.Tensor) -> torch.Tensor:
    """128 x 128 scales [N/128, K/128] of w [N, K] as `_scaled_mm(x, w.t())` takes them: [K/128, N/128], strides
    (1, K/128). K/128 must be a multiple of 4 (torch's v2 API pads that dimension to one)."""
    if scales.shape[1] % 4:
        raise ValueError(f"K/128 = {scales.shape[1]} is not a multiple of 4")
    return scales.t()


def weight_row_block_scales(scales: torch.Tensor, v2: bool) -> torch.Tensor:
    """1 x 128 scales [N, K/128] of w [N, K] for `_scaled_mm(x, w.t())`: [K/128, N] row-major for `torch._scaled_mm`,
    [N, K/128] N-major (strides (1, N)) for `torch.nn.functional.scaled_mm`."""
    return scales.t().contiguous().t() if v2 else scales.t().contiguous()


@dataclass
class Operands:
    """One quantization of x [M, K] and COPIES weight sets [N, K]. The scales are laid out once, as
    `torch._scaled_mm` takes them, so that a timed call launches the GEMM alone."""
    x: torch.Tensor  # fp16 for the fp16 recipe, else e4m3 codes
    ws: list[torch.Tensor]
    x_scales: torch.Tensor | None  # [M, 1] rows or `act_block_scales` [M, K/128]
    w_scales: list[torch.Tensor | None]  # [1, N] rows, `weight_block_scales` or `weight_row_block_scales`
    x_runs: torch.Tensor  # [M, K/128] float64: each row's scale on each 128-wide run of K
    w_runs: torch.Tensor  # [N, K/128] float64, the first weight set's


def quantize(recipe: str, x: torch.Tensor, ws: list[torch.Tensor]) -> Operands:
    """x and ws quantized as `recipe` says: 'fp16', 'rows' (one scale per row), 'block' (x 1 x 128, w 128 x 128)
    or 'rowblock' (both 1 x 128)."""
    m, k = x.shape
    runs = k // BLOCK
    if recipe == "fp16":
        ones = torch.ones(m, runs, dtype=torch.float64, device=x.device)
        return Operands(x, ws, None, [None] * len(ws), ones, torch.ones(ws[0].shape[0], runs).to(ones))
    if recipe == "rows":
        cx, sx = quantize_rows_fp8_ref(x)
        cws, sws = zip(*(quantize_rows_fp8_ref(w) for w in ws))
        return Operands(cx, list(cws), sx[:, None], [sw[None, :] for sw in sws],
                        sx.double()[:, None].expand(m, runs), sws[0].double()[:, None].expand(-1, runs))
    w_rows = {"block": BLOCK, "rowblock": 1}[recipe]
    cx, sx = quantize_blocks(x, 1, BLOCK)
    cws, sws = zip(*(quantize_blocks(w, w_rows, BLOCK) for w in ws))
    laid_out = [weight_block_scales(sw) if recipe == "block" else weight_row_block_scales(sw, v2=False) for sw in sws]
    return Operands(cx, list(cws), act_block_scales(sx), laid_out, sx.double(), expand_scales(sws[0], w_rows, 1))


def exact_and_slack(ops: Operands, acc_bits: int, rows: int, fp8: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 [rows, N]: the exact product of the first `rows` rows with the first weight set, and how far the
    GEMM's arithmetic may land from it before its output rounding (module docstring)."""
    x, w = ops.x[:rows], ops.ws[0]
    k = x.shape[1]
    if not fp8:
        x64, w64 = x.double(), w.double()
        allowance = k * torch.finfo(torch.float32).eps + FP16_PARTIALS * torch.finfo(torch.float16).eps
        return x64 @ w64.t(), allowance * (x64.abs() @ w64.abs().t())
    exact = torch.zeros(rows, w.shape[0], dtype=torch.float64, device=x.device)
    slack, total_abs = torch.zeros_like(exact), torch.zeros_like(exact)
    for run in range(k // FP8_PROMOTION_K):
        cols = slice(run * FP8_PROMOTION_K, (run + 1) * FP8_PROMOTION_K)
        run_sum, run_bound = fp8_sum_and_bound(x[:, cols], w[:, cols], acc_bits)
        outer = ops.x_runs[:rows, run][:, None] * ops.w_runs[:, run][None, :]  # [rows, N]
        exact += run_sum * outer
        slack += run_bound * outer
        total_abs += (x[:, cols].double().abs() @ w[:, cols].double().abs().t()) * outer
    return exact, slack + (k // FP8_PROMOTION_K) * torch.finfo(torch.float32).eps * total_abs


def check_ratio(y: torch.Tensor, exact: torch.Tensor, slack: torch.Tensor) -> float:
    """max |y - exact| / (slack + half an ulp of y's dtype at |exact| + slack, at least its smallest normal's):
    <= 1 is as accurate as the arithmetic allows."""
    info = torch.finfo(y.dtype)
    half_ulp = info.eps / 2 * torch.maximum(exact.abs() + slack, torch.full_like(exact, info.smallest_normal))
    return ((y.double() - exact).abs() / (slack + half_ulp)).max().item()


@dataclass
class Variant:
    name: str
    recipe: str  # how its operands are quantized (`quantize`)
    unit_scales: bool  # scales left to the consumer: checked against the product of the codes alone
    call: Callable[[Operands, int], torch.Tensor]  # (operands, weight set) -> y [M, N]


def _scaled(out_dtype: torch.dtype, unit: bool = False) -> Callable[[Operands, int], torch.Tensor]:
    def call(ops: Operands, i: int) -> torch.Tensor:
        sa, sb = (unit_scale(ops.x.device),) * 2 if unit else (ops.x_scales, ops.w_scales[i])
        return torch._scaled_mm(ops.x, ops.ws[i].t(), scale_a=sa, scale_b=sb, out_dtype=out_dtype)
    return call


def _scaled_v2(ops: Operands, i: int) -> torch.Tensor:
    import torch.nn.functional as F  # noqa: N812 (torch's spelling)
    kinds = F.ScalingType  # weight_block_scales' layout is also v2's where K/128 is a multiple of 4
    return F.scaled_mm(ops.x, ops.ws[i].t(), ops.x_scales, kinds.BlockWise1x128, ops.w_scales[i],
                       kinds.BlockWise128x128, output_dtype=torch.float16)


VARIANTS = (
    Variant("fp16", "fp16", False, lambda ops, i: torch.mm(ops.x, ops.ws[i].t())),
    Variant("unit bf16", "rows", True, _scaled(torch.bfloat16, unit=True)),
    Variant("rowwise fp16", "rows", False, _scaled(torch.float16)),
    Variant("block fp16", "block", False, _scaled(torch.float16)),
    Variant("block bf16", "block", False, _scaled(torch.bfloat16)),
    Variant("block v2 fp16", "block", False, _scaled_v2),
    Variant("block 1x128w fp16", "rowblock", False, _scaled(torch.float16)),
)


def refusal(e: Exception) -> str:
    """An exception in one line of at most 300 characters, as the table and the JSON carry it."""
    return f"{type(e).__name__}: " + " | ".join(line.strip() for line in str(e).splitlines() if line.strip())[:300]


def probe_shape(name: str, k: int, n: int, m: int, *, device: str, acc_bits: int,
                timer: Callable[[Callable[[int], torch.Tensor]], float],
                variants: tuple[Variant, ...] = VARIANTS, check_rows: int = CHECK_ROWS) -> list[dict]:
    """One row per variant at one shape: us (None where refused), TFLOP/s, check ratio, ok, error."""
    g = torch.Generator(device=device).manual_seed(k * n + m)
    x = torch.randn(m, k, device=device, generator=g).half()
    ws = [(0.05 * torch.randn(n, k, device=device, generator=g)).half() for _ in range(COPIES)]
    operands = {recipe: quantize(recipe, x, ws) for recipe in {v.recipe for v in variants}}
    references = {}
    rows = []
    for v in variants:
        row = {"layer": name, "K": k, "N": n, "M": m, "variant": v.name, "us": None, "tflops": None,
               "check_ratio": None, "ok": False, "error": None}
        ops = operands[v.recipe]
        try:
            y = v.call(ops, 0)
            key = (v.recipe, v.unit_scales)
            if key not in references:
                unit = Operands(ops.x, ops.ws, None, [None], torch.ones_like(ops.x_runs), torch.ones_like(ops.w_runs))
                references[key] = exact_and_slack(unit if v.unit_scales else ops, acc_bits, min(check_rows, m),
                                                  fp8=v.recipe != "fp16")
            row["check_ratio"] = check_ratio(y[:check_rows], *references[key])
            row["ok"] = row["check_ratio"] <= 1
            row["us"] = timer(lambda i, v=v, ops=ops: v.call(ops, i))
            row["tflops"] = 2 * m * k * n / row["us"] / 1e6 if row["us"] else None
        except Exception as e:  # refused by torch or the GPU: reported, not fatal
            row["error"] = refusal(e)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the header and rows here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    from kernels.fp8 import accumulator_bits
    from tools.kernels.check_realtime_gpu import graph_us

    start = time.time()
    props = torch.cuda.get_device_properties(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    acc_bits = accumulator_bits(torch.device("cuda"))
    header = {"gpu": props.name, "sm": f"{props.major}{props.minor}", "torch": torch.__version__,
              "cuda": torch.version.cuda, "acc_bits": acc_bits,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit_id(), "operands": "random",
              "command": "python -m tools.kernels.bench_fp8_scaling " + " ".join(sys.argv[1:])}
    print(json.dumps(header))
    print(f"{'layer':<9}{'M':>5} " + "".join(f"{v.name:>19}" for v in VARIANTS) + "   (us; check ratio <= 1)")
    rows, failed = [], False
    for m in ROWS:
        for name, k, n in SHAPES:
            shape_rows = probe_shape(name, k, n, m, device="cuda", acc_bits=acc_bits, timer=graph_us)
            rows += shape_rows
            cells = [f"{r['us']:9.2f} ({r['check_ratio']:.2f})" if r["us"] else "refused" for r in shape_rows]
            print(f"{name:<9}{m:>5} " + "".join(f"{c:>19}" for c in cells))
            failed |= any(r["us"] and not r["ok"] for r in shape_rows)
    for r in {r["variant"]: r for r in rows if r["error"]}.values():
        print(f"   {r['variant']} refused ({r['layer']} M={r['M']}): {r['error']}")
    print(f"{time.time() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
