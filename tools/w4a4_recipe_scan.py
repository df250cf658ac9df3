"""W4A4 recipes side by side (issue 22 target 7): for each QuantConfig, the LM quantized as Realtime does
(`quantize_` with `synthetic_calibration`) against fp32 on ONE CFG batch of one workload: step-0 guided-argmax
agreement and 1 - logit cosine (tools/fidelity.py), and per layer the residual stream's relative error after
that layer, so the table shows where the drift starts and grows. CPU, fp32, the eager reference path:

    python -m tools.w4a4_recipe_scan --model /tmp/w4full [--workload en-ref3-out3] [--seed 1] [--recipes default rank64]

`--seed` draws the workload's random reference-audio tokens: with random weights one workload and one seed is one
sample of near-tied logits, so a recipe is judged on several (workload, seed) pairs.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from dataclasses import dataclass

import torch
from torch import nn

from engine.lm.decode import CfgBatch, build_cfg_batch, eager_forward
from engine.quant import QuantConfig, quantize_
from engine.quant.realtime import synthetic_calibration
from tools.fidelity import logits_cosine, step0_argmax_agreement
from tools.quant_report import real_positions, workload_prompts

RECIPES: dict[str, QuantConfig] = {
    "default": QuantConfig(),
    "alpha0.3": QuantConfig(smooth_alpha=0.3),
    "alpha0.7": QuantConfig(smooth_alpha=0.7),
    "rank64": QuantConfig(rank=64),
    "layer0-fp16": QuantConfig(keep_fp16=("layers.0.*",)),
    "down-fp16": QuantConfig(keep_fp16=("*.down_proj",)),
    "down-w8a8": QuantConfig(w8a8=("*.down_proj",)),
    "layer0-fp16+down-w8a8": QuantConfig(keep_fp16=("layers.0.*",), w8a8=("*.down_proj",)),
}


@dataclass
class RecipeResult:
    name: str
    agreement: float
    one_minus_cos: float
    layer_errors: list[float]  # relative error of the residual stream after each layer
    seconds: float


def step0_logits(lm: nn.Module, batch: CfgBatch) -> torch.Tensor:
    """Logits [2, C, T, V] (cond target rows, uncond rows) of a one-item batch, as fidelity.py takes them."""
    logits = eager_forward(lm)(batch)  # [2T, C, V]: the item's cond target rows, then its uncond rows
    return logits.view(2, -1, *logits.shape[1:]).transpose(1, 2)


def forward_with_layers(lm: nn.Module, batch: CfgBatch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Step-0 logits and each layer's output residual stream at the batch's prompt positions."""
    keep = real_positions(batch)
    states: list[torch.Tensor] = []

    def grab(module, args, output):
        x = output[0] if isinstance(output, tuple) else output
        states.append(x.detach().reshape(-1, x.shape[-1])[keep].double())

    hooks = [block.register_forward_hook(grab) for block in lm.layers]
    try:
        with torch.no_grad():
            logits = step0_logits(lm, batch)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, states


def relative_error(test: torch.Tensor, ref: torch.Tensor) -> float:
    return ((test - ref).norm() / ref.norm()).item()


def scan(lm: nn.Module, batch: CfgBatch, recipes: dict[str, QuantConfig], progress) -> list[RecipeResult]:
    """Each recipe applied to a fresh copy of the fp32 `lm`, measured against `lm` on `batch`."""
    ref_logits, ref_states = forward_with_layers(lm, batch)
    results = []
    for name, cfg in recipes.items():
        progress(f"recipe {name}")
        start = time.perf_counter()
        quantized = copy.deepcopy(lm)
        with torch.no_grad():
            quantize_(quantized, cfg, synthetic_calibration)
        logits, states = forward_with_layers(quantized, batch)
        del quantized
        results.append(RecipeResult(
            name, step0_argmax_agreement(logits, ref_logits), 1 - logits_cosine(logits, ref_logits),
            [relative_error(s, r) for s, r in zip(states, ref_states, strict=True)], time.perf_counter() - start))
    return results


def render(results: list[RecipeResult], recipes: dict[str, QuantConfig]) -> str:
    """Two Markdown tables: the end-to-end measures per recipe, and each layer's relative error per recipe."""
    lines = ["| recipe | config | step-0 argmax agreement | 1 - logit cosine | largest jump (layer: +rel err) "
             "| last layer rel err | seconds |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        jumps = [r.layer_errors[0]] + [b - a for a, b in zip(r.layer_errors, r.layer_errors[1:])]
        worst = max(range(len(jumps)), key=jumps.__getitem__)
        cells = [r.name, f"`{recipes[r.name].to_json()}`", f"{r.agreement:.1%}".replace("%", " %"),
                 f"{r.one_minus_cos:.2e}", f"{worst}: +{jumps[worst]:.3f}", f"{r.layer_errors[-1]:.3f}",
                 f"{r.seconds:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| layer | " + " | ".join(r.name for r in results) + " |",
              "| --- |" + " --- |" * len(results)]
    for layer in range(len(results[0].layer_errors) if results else 0):
        lines.append(f"| {layer} | " + " | ".join(f"{r.layer_errors[layer]:.3f}" for r in results) + " |")
    return "\n".join(lines)


def workload_batch(folder, lm: nn.Module, workload: str, seed: int) -> CfgBatch:
    """The CFG batch of the one-item `workload`, its reference tokens drawn with `seed`."""
    from engine.lm.checkpoint import load_text_tokenizer

    prompts = workload_prompts(load_text_tokenizer(folder), lm.cfg, (workload,), seed=seed)
    if len(prompts) != 1:
        raise SystemExit(f"{workload} plans {len(prompts)} items: pick a one-item workload")
    return build_cfg_batch(prompts, lm.cfg.audio_mask_id, "cpu")


def main(argv: list[str] | None = None) -> int:
    from engine.constants import DEMO_MODEL
    from engine.lm.checkpoint import load_lm, resolve_checkpoint

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(DEMO_MODEL))
    parser.add_argument("--workload", default="en-ref3-out3")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload's random reference tokens")
    parser.add_argument("--recipes", nargs="+", choices=sorted(RECIPES), default=list(RECIPES))
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f} s] {message}", file=sys.stderr, flush=True)

    folder = resolve_checkpoint(args.model)
    lm = load_lm(folder, "cpu", torch.float32)
    batch = workload_batch(folder, lm, args.workload, args.seed)
    recipes = {name: RECIPES[name] for name in args.recipes}
    print(render(scan(lm, batch, recipes, progress), recipes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
