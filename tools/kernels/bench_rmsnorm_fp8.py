"""Realtime's quantizing RMSNorms (`kernels.rmsnorm.rmsnorm_fp8` / `add_rmsnorm_fp8`: the norm and the FP8
activation quantizer of qkv_proj / gate_up_proj in one pass) of this tree beside another copy of kernels/
(e.g. main's before a change) and beside the plain fp16 norms, at the LM's row counts:

    python -m tools.kernels.bench_rmsnorm_fp8 [--before DIR] [--rows 320 896] [--hidden 1024] [--json FILE]

DIR holds a `kernels/` folder, imported beside this tree's under its own module objects. Every variant is
checked before it is timed: the plain norms within twice `rmsnorm_ref`'s error of a float64 norm plus one
ulp of the largest value; each quantizing norm's codes and scales bit for bit what its own tree's FP8
reference makes of its own plain norm's output (a tree older than the multiplying quantizers takes
`smooth` and divides, `kernels/fp8_ref.py` says what changed); the two trees' codes may differ at e4m3
ties only: one step at most, in at most MOVED_LIMIT of the elements. Times: microseconds per call replayed
from a CUDA graph of `tools.kernels.check_realtime_gpu.graph_us` (8 input sets in turn). Exits non-zero
when a check fails. Random inputs; say so where the figures are used.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from kernels.numerics import ieee_reciprocal

EPS = 1e-6
COPIES = 8  # input sets cycled through while timing (as check_realtime_gpu)
MOVED_LIMIT = 1e-4  # fraction of codes two trees may quantize differently (ties: ~1e-6, kernels/fp8_ref.py)


def import_kernels(root: Path | None) -> SimpleNamespace:
    """`kernels.rmsnorm` and `kernels.fp8_ref` of the `kernels/` folder in `root` (this tree's when None),
    as module objects of their own: `kernels` in sys.modules is this tree's again afterwards."""
    if root is None:
        return SimpleNamespace(rmsnorm=importlib.import_module("kernels.rmsnorm"),
                               fp8_ref=importlib.import_module("kernels.fp8_ref"))
    ours = {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] == "kernels"}
    sys.path.insert(0, str(root))
    try:
        return SimpleNamespace(rmsnorm=importlib.import_module("kernels.rmsnorm"),
                               fp8_ref=importlib.import_module("kernels.fp8_ref"))
    finally:
        sys.path.remove(str(root))
        for name in [name for name in sys.modules if name.split(".")[0] == "kernels"]:
            del sys.modules[name]
        sys.modules.update(ours)


def takes_reciprocals(tree: SimpleNamespace) -> bool:
    """True for the multiplying quantizers (`inv_smooth`), False for the dividing ones before them (`smooth`)."""
    return "inv_smooth" in inspect.signature(tree.rmsnorm.rmsnorm_fp8).parameters


def smoothing_of(tree: SimpleNamespace, smooth: torch.Tensor) -> torch.Tensor:
    """What `tree`'s quantizing norms take for the smoothing factors `smooth` [K] fp32."""
    return ieee_reciprocal(smooth) if takes_reciprocals(tree) else smooth


def reference_rows(tree: SimpleNamespace, y: torch.Tensor, smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes and scales of `tree`'s FP8 reference for the normed rows y [M, K]."""
    if takes_reciprocals(tree):
        return tree.fp8_ref.quantize_act_fp8_ref(y, ieee_reciprocal(smooth))
    return tree.fp8_ref.quantize_rows_fp8_ref(y.float() / smooth)


def make_inputs(rows: int, hidden: int, seed: int, device: str) -> SimpleNamespace:
    """fp16 sublayer output x and residual [rows, hidden] (a few outlier channels), norm weight, smoothing."""
    g = torch.Generator().manual_seed(seed)

    def activation() -> torch.Tensor:
        t = torch.randn(rows, hidden, generator=g)
        t[:, [3, hidden // 2 + 5]] *= 40
        return t.to(device, torch.float16)

    return SimpleNamespace(x=activation(), residual=activation(),
                           weight=(1 + 0.2 * torch.randn(hidden, generator=g)).to(device, torch.float16),
                           smooth=(0.5 + torch.rand(hidden, generator=g)).to(device))


def plain_norm_failures(tree: SimpleNamespace, inp: SimpleNamespace) -> list[str]:
    """The plain norms against a float64 norm: at most twice rmsnorm_ref's error plus one ulp of the largest."""
    rn = tree.rmsnorm
    failures = []
    normed, _ = rn.add_rmsnorm(inp.x, inp.residual, inp.weight, EPS)
    for name, out, x in (("rmsnorm", rn.rmsnorm(inp.x, inp.weight, EPS), inp.x),
                         ("add_rmsnorm", normed, inp.x + inp.residual)):
        exact = rn.rmsnorm_ref(x.double(), inp.weight.double(), EPS)
        torch_err = (rn.rmsnorm_ref(x, inp.weight, EPS).double() - exact).abs().max().item()
        err = (out.double() - exact).abs().max().item()
        if not err <= 2 * torch_err + torch.finfo(out.dtype).eps * exact.abs().max().item():
            failures.append(f"plain {name}: error {err:.3g} against torch's {torch_err:.3g}")
    return failures


def quant_rows(tree: SimpleNamespace, inp: SimpleNamespace) -> dict[str, object]:
    """`tree`'s two quantizing norms of the inputs: name -> FP8Rows."""
    smoothing = smoothing_of(tree, inp.smooth)
    rows, _ = tree.rmsnorm.add_rmsnorm_fp8(inp.x, inp.residual, inp.weight, EPS, smoothing)
    return {"rmsnorm_fp8": tree.rmsnorm.rmsnorm_fp8(inp.x, inp.weight, EPS, smoothing), "add_rmsnorm_fp8": rows}


def quant_norm_failures(tree: SimpleNamespace, inp: SimpleNamespace, label: str) -> list[str]:
    """Each quantizing norm against its tree's reference applied to its tree's plain norm, bit for bit."""
    failures = []
    plain = {"rmsnorm_fp8": tree.rmsnorm.rmsnorm(inp.x, inp.weight, EPS),
             "add_rmsnorm_fp8": tree.rmsnorm.add_rmsnorm(inp.x, inp.residual, inp.weight, EPS)[0]}
    for name, got in quant_rows(tree, inp).items():
        codes, scales = reference_rows(tree, plain[name], inp.smooth)
        if not (torch.equal(got.codes.view(torch.uint8), codes.view(torch.uint8)) and torch.equal(got.scales, scales)):
            failures.append(f"{label} {name}: codes or scales differ from its reference")
    return failures


def moved_codes(a, b) -> tuple[int, float]:
    """(largest e4m3 step between two FP8Rows' codes, fraction of codes that differ)."""
    grid = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    grid = grid[~grid.isnan()].unique().to(a.codes.device)
    steps = (torch.bucketize(a.codes.float(), grid) - torch.bucketize(b.codes.float(), grid)).abs()
    return int(steps.max().item()), (steps > 0).float().mean().item()


def check(trees: dict[str, SimpleNamespace], rows: int, hidden: int, device: str) -> list[str]:
    """Failures of every check at one shape (an empty list when all pass)."""
    inp = make_inputs(rows, hidden, seed=rows, device=device)
    failures = plain_norm_failures(trees["after"], inp)
    for label, tree in trees.items():
        failures += quant_norm_failures(tree, inp, label)
    if "before" in trees:
        before, after = quant_rows(trees["before"], inp), quant_rows(trees["after"], inp)
        for name in before:
            step, moved = moved_codes(before[name], after[name])
            print(f"   {rows} rows {name}: {moved:.2e} of the codes moved between the trees, by {step} step at most")
            if step > 1 or moved > MOVED_LIMIT:
                failures.append(f"{rows} rows {name}: codes moved by {step} steps, {moved:.2e} of them")
    return failures


def time_rows(trees: dict[str, SimpleNamespace], rows: int, hidden: int) -> dict[str, float]:
    """Microseconds per call of the plain fp16 norms (this tree) and each tree's quantizing ones."""
    from tools.kernels.check_realtime_gpu import graph_us

    inps = [make_inputs(rows, hidden, seed=rows + c, device="cuda") for c in range(COPIES)]
    rn = trees["after"].rmsnorm
    out = {"rmsnorm fp16": graph_us(lambda i: rn.rmsnorm(inps[i].x, inps[i].weight, EPS)),
           "add_rmsnorm fp16": graph_us(lambda i: rn.add_rmsnorm(inps[i].x, inps[i].residual, inps[i].weight, EPS))}
    for label, tree in trees.items():
        smoothing = [smoothing_of(tree, inp.smooth) for inp in inps]
        out[f"rmsnorm_fp8 {label}"] = graph_us(
            lambda i, t=tree: t.rmsnorm.rmsnorm_fp8(inps[i].x, inps[i].weight, EPS, smoothing[i]))
        out[f"add_rmsnorm_fp8 {label}"] = graph_us(
            lambda i, t=tree: t.rmsnorm.add_rmsnorm_fp8(inps[i].x, inps[i].residual, inps[i].weight, EPS, smoothing[i]))
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a folder holding another kernels/ to time beside this tree's")
    parser.add_argument("--rows", type=int, nargs="+", default=[320, 896], help="rows per call (CFG rows of a step)")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--json", type=Path, help="append one JSON line per row count here")
    args = parser.parse_args(argv)
    if args.before is not None and not (args.before / "kernels" / "rmsnorm.py").is_file():
        parser.error(f"--before {args.before}: no kernels/rmsnorm.py there")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    trees = {"after": import_kernels(None)}
    if args.before is not None:
        trees["before"] = import_kernels(args.before)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; RANDOM inputs, fp16, hidden {args.hidden}")
    failures = []
    for rows in args.rows:
        failures += check(trees, rows, args.hidden, "cuda")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    for rows in args.rows:
        times = time_rows(trees, rows, args.hidden)
        print(f"{rows} rows: " + ", ".join(f"{name} {us:.2f} us" for name, us in times.items()))
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps({"rows": rows, "hidden": args.hidden, "us": times}) + "\n")
    print("ALL CHECKS PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
