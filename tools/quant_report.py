"""`launcher.py quant-report`: what each part of SVDQuant buys, linear by linear, on real prompt layouts.

The LM runs in fp32 on the CPU. Smoothing is calibrated on one CFG batch of workload prompts and
measured on ANOTHER (other texts, languages and reference tokens; reference tokens are random). For
every projection linear of the selected layers the report gives the output SQNR against fp32 of plain
RTN W4A4, smoothing only, the low-rank branch only, SVDQuant (both), W8A8 int8 and W8A8 FP8; per
selected layer, the logits cosine to fp32 when only that layer is SVDQuant; and the mixed-precision
config those numbers suggest.
"""
from __future__ import annotations

import functools
import math
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from engine.config import GenerationConfig, ModelConfig
from engine.lm.decode import CfgBatch, build_cfg_batch, eager_forward
from engine.lm.prompt import PromptItem, build_prompt
from engine.quant import (
    QUANTIZED_LINEARS,
    TARGET_NAMES,
    QuantConfig,
    record_input_amax,
    replace_module,
    target_linears,
)
from kernels.w4a4_ref import GROUP
from tools.fidelity import sqnr_db

CALIBRATION_WORKLOADS = ("en-ref3-out3", "zh-ref6-out10")
EVALUATION_WORKLOADS = ("baseline", "vi-ref6-out10")  # texts and languages the calibration never saw
SVDQUANT = QuantConfig()  # what realtime mode ships: smoothing alpha 0.5 + rank 32
RANK = SVDQUANT.rank

LAYER_FACTOR = 2.0  # a layer whose 1 - cos exceeds this many times the median of the measured layers
LINEAR_DROP_DB = 3.0  # a linear whose SVDQuant SQNR falls this far below the median of its kind
W8A8_ENOUGH_DB = 30.0  # a flagged part goes W8A8 when int8 keeps it above this, else FP16

RANDOM_NOTE = ("RANDOM WEIGHTS: no trained activation outliers; SVDQuant's smoothing matters far more "
               "on real weights.")


@dataclass(frozen=True)
class Variant:
    label: str
    cfg: QuantConfig  # its scheme() picks the module class; "fp16" means the shape does not fit


VARIANTS = (
    Variant("RTN W4A4", QuantConfig(rank=0, smooth_alpha=None)),
    Variant("smooth only", QuantConfig(rank=0)),
    Variant(f"low rank {RANK} only", QuantConfig(smooth_alpha=None)),
    Variant(f"SVDQuant (smooth + r{RANK})", SVDQUANT),
    Variant("W8A8 int8", QuantConfig(w8a8=("*",))),
    Variant("W8A8 FP8", QuantConfig(fp8=("*",))),
)
SVDQUANT_LABEL = VARIANTS[3].label
W8A8_LABEL = VARIANTS[4].label


@dataclass
class LinearRow:
    layer: int
    name: str  # module name in the LM, e.g. "layers.0.attn.qkv_proj"
    in_features: int
    out_features: int
    sqnr: dict[str, float | None]  # variant label -> dB (None: the scheme cannot take this shape)

    @property
    def kind(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def convert(name: str, linear: nn.Linear, amax: torch.Tensor, cfg: QuantConfig) -> nn.Module | None:
    """`linear` converted as `cfg` says for `name`, or None where `cfg` leaves it 16-bit."""
    scheme = cfg.scheme(name, linear)
    return None if scheme == "fp16" else QUANTIZED_LINEARS[scheme].from_linear(linear, amax, cfg)


@torch.no_grad()
def linear_sqnrs(name: str, linear: nn.Linear, amax: torch.Tensor, x: torch.Tensor) -> dict[str, float | None]:
    """Output SQNR (dB) against `linear` of each variant, calibrated with `amax` [K], on inputs x [M, K]."""
    want = linear(x)  # [M, N]
    out = {}
    for v in VARIANTS:
        q = convert(name, linear, amax, v.cfg)
        out[v.label] = None if q is None else sqnr_db(want, q(x))
    return out


def workload_prompts(tokenizer, cfg: ModelConfig, names: tuple[str, ...], seed: int) -> list[PromptItem]:
    """Every generation item of the named workloads as the engine lays them out (style + text +
    reference audio + MASK target), each workload with random reference tokens of its clip length."""
    from engine.lm.plan import plan_request
    from engine.request import SpeechRequest
    from engine.text.duration import FRAME_RATE
    from engine.voice import Voice
    from tools.workloads import LANGUAGES, select

    gen = torch.Generator().manual_seed(seed)
    prompts = []
    for w in select(",".join(names)):
        ref = torch.randint(0, cfg.audio_mask_id, (cfg.num_codebooks, w.ref_seconds * FRAME_RATE), generator=gen)
        plan = plan_request(SpeechRequest(text=w.text, voice=Voice(ref, w.ref_text, rms=None),
                                          language=LANGUAGES[w.language], config=GenerationConfig(duration=w.duration)))
        prompts += [build_prompt(tokenizer, cfg, item.text, item.target_len, ref_text=item.ref_text,
                                 ref_tokens=item.ref_tokens, language=plan.language, instruct=plan.instruct,
                                 denoise=plan.denoise) for item in plan.items]
    return prompts


def real_positions(batch: CfgBatch) -> torch.Tensor:
    """Flat (row * S + position) indices of the batch's prompt tokens, padding left out."""
    S = batch.input_ids.shape[-1]
    lens = torch.tensor(batch.cond_lens + batch.target_lens)  # [2B]: cond rows, then uncond rows
    return (torch.arange(S) < lens[:, None]).flatten().nonzero().squeeze(1)


def evenly(index: torch.Tensor, count: int) -> torch.Tensor:
    """At most `count` entries of `index`, spread evenly over it (first and last kept)."""
    if index.numel() <= count:
        return index
    return index[torch.linspace(0, index.numel() - 1, count).round().long()]


def capture_inputs(lm: nn.Module, linears: dict[str, nn.Linear], batch: CfgBatch,
                   keep: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Inputs [len(keep), K] of each named linear at the flat positions `keep`, and the logits of
    the batch's target rows, from one forward."""
    inputs: dict[str, torch.Tensor] = {}

    def grab(name, module, args, output):
        inputs[name] = args[0].detach().reshape(-1, module.in_features)[keep]

    hooks = [m.register_forward_hook(functools.partial(grab, name)) for name, m in linears.items()]
    try:
        with torch.no_grad():
            logits = eager_forward(lm)(batch)
    finally:
        for hook in hooks:
            hook.remove()
    return inputs, logits


@contextmanager
def swapped(lm: nn.Module, modules: dict[str, nn.Module]) -> Iterator[None]:
    """`lm` with the named submodules replaced, put back on exit."""
    originals = {name: lm.get_submodule(name) for name in modules}
    for name, module in modules.items():
        replace_module(lm, name, module)
    try:
        yield
    finally:
        for name, module in originals.items():
            replace_module(lm, name, module)


def layer_sensitivity(lm: nn.Module, layer: int, linears: dict[str, nn.Linear], amax: dict[str, torch.Tensor],
                      batch: CfgBatch, reference: torch.Tensor) -> float:
    """Logits cosine to `reference` when only `layer`'s projection linears are SVDQuant W4A4."""
    from tools.fidelity import logits_cosine

    prefix = f"layers.{layer}."
    converted = {name: convert(name, linear, amax[name], SVDQUANT)
                 for name, linear in linears.items() if name.startswith(prefix)}
    with swapped(lm, {name: m for name, m in converted.items() if m is not None}), torch.no_grad():
        return logits_cosine(eager_forward(lm)(batch), reference)


def suggest(rows: list[LinearRow], cosines: dict[int, float]) -> tuple[QuantConfig, list[str]]:
    """The mixed-precision config the measurements point to, and why (relative rules: see the constants)."""
    def keep_as(parts: list[LinearRow]) -> str:
        worst_w8a8 = min(r.sqnr[W8A8_LABEL] for r in parts)
        return "w8a8" if worst_w8a8 >= W8A8_ENOUGH_DB else "keep_fp16"

    chosen: dict[str, list[str]] = {"w8a8": [], "keep_fp16": []}
    reasons = []
    errors = {layer: 1 - cos for layer, cos in cosines.items()}
    typical_error = statistics.median(errors.values()) if errors else 0.0
    flagged_layers = {layer for layer, err in errors.items() if err > LAYER_FACTOR * typical_error}
    for layer in sorted(flagged_layers):
        target = keep_as([r for r in rows if r.layer == layer])
        chosen[target].append(f"layers.{layer}.*")
        reasons.append(f"layer {layer}: 1 - cos {errors[layer]:.2e} is over {LAYER_FACTOR:g}x the median "
                       f"{typical_error:.2e} of the measured layers -> {target}")
    scored = [r for r in rows if r.sqnr[SVDQUANT_LABEL] is not None and r.layer not in flagged_layers]
    for kind in TARGET_NAMES:
        of_kind = [r for r in scored if r.kind == kind]
        if not of_kind:
            continue
        typical = statistics.median(r.sqnr[SVDQUANT_LABEL] for r in of_kind)
        for r in of_kind:
            if r.sqnr[SVDQUANT_LABEL] < typical - LINEAR_DROP_DB:
                target = keep_as([r])
                chosen[target].append(r.name)
                reasons.append(f"{r.name}: SVDQuant {r.sqnr[SVDQUANT_LABEL]:.1f} dB is over {LINEAR_DROP_DB:g} dB "
                               f"below the median {typical:.1f} dB of the {kind} linears -> {target}")
    cfg = QuantConfig(w8a8=tuple(chosen["w8a8"]), keep_fp16=tuple(chosen["keep_fp16"]))
    return cfg, reasons


def _db(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def sqnr_table(rows: list[LinearRow]) -> str:
    labels = [v.label for v in VARIANTS]
    lines = ["| layer | linear | K -> N | " + " | ".join(labels) + " |", "|---" * (3 + len(labels)) + "|"]
    for r in rows:
        lines.append(f"| {r.layer} | {r.kind} | {r.in_features} -> {r.out_features} | "
                     + " | ".join(_db(r.sqnr[label]) for label in labels) + " |")
    common = [r for r in rows if None not in r.sqnr.values()]  # so every column averages the same linears
    if common:
        means = [statistics.fmean(r.sqnr[label] for r in common) for label in labels]
        lines.append(f"| **mean of {len(common)}** | | | " + " | ".join(_db(m) for m in means) + " |")
        lines.append("| **gain vs RTN** | | | " + " | ".join(f"{m - means[0]:+.1f}" for m in means) + " |")
    return "\n".join(lines)


def sensitivity_table(cosines: dict[int, float]) -> str:
    lines = ["| layer | logits cosine to fp32 | 1 - cosine |", "|---|---|---|"]
    lines += [f"| {layer} | {cos:.6f} | {1 - cos:.2e} |" for layer, cos in cosines.items()]
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _layers(spec: str | None, num_layers: int) -> list[int]:
    """--layers: a comma list, or by default 5 evenly spaced layers (first and last included)."""
    if not spec:
        return sorted({math.ceil(i * (num_layers - 1) / 4) for i in range(5)})  # 28 layers: 0,7,14,21,27
    layers = sorted({int(s) for s in spec.split(",") if s.strip()})
    wrong = [i for i in layers if not 0 <= i < num_layers]
    if wrong:
        raise SystemExit(f"--layers {wrong}: this model has layers 0..{num_layers - 1}")
    return layers


@dataclass
class Report:
    layers: list[int]
    rows: list[LinearRow]
    cosines: dict[int, float]  # layer -> logits cosine to fp32 with only that layer SVDQuant
    calibration_positions: int
    evaluation_positions: int
    evaluated_positions: int


def measure(lm: nn.Module, tokenizer, layers: list[int], tokens: int, progress) -> Report:
    """Calibrate on one CFG batch, capture the selected layers' linear inputs on another, and measure."""
    linears = {name: m for name, m in target_linears(lm).items() if int(name.split(".")[1]) in layers}
    mask_id = lm.cfg.audio_mask_id
    calibration = build_cfg_batch(workload_prompts(tokenizer, lm.cfg, CALIBRATION_WORKLOADS, seed=0), mask_id, "cpu")
    evaluation = build_cfg_batch(workload_prompts(tokenizer, lm.cfg, EVALUATION_WORKLOADS, seed=1), mask_id, "cpu")
    progress(f"calibrating on {', '.join(CALIBRATION_WORKLOADS)}")
    amax = record_input_amax(lm, linears, lambda m: eager_forward(m)(calibration))
    real = real_positions(evaluation)
    keep = evenly(real, tokens)
    progress(f"capturing inputs on {', '.join(EVALUATION_WORKLOADS)}")
    inputs, reference = capture_inputs(lm, linears, evaluation, keep)
    rows = []
    for name, linear in linears.items():
        progress(f"SQNR of {name}")
        rows.append(LinearRow(int(name.split(".")[1]), name, linear.in_features, linear.out_features,
                              linear_sqnrs(name, linear, amax[name], inputs.pop(name))))
    cosines = {}
    for layer in layers:
        progress(f"sensitivity of layer {layer}")
        cosines[layer] = layer_sensitivity(lm, layer, linears, amax, evaluation, reference)
    return Report(layers, rows, cosines, len(real_positions(calibration)), len(real), len(keep))


def render(report: Report, info: dict, model_line: str, random_weights: bool) -> str:
    """The report as markdown: provenance, the SQNR table, the sensitivity table and the suggestion."""
    cfg, reasons = suggest(report.rows, report.cosines)
    return "\n".join([
        f"# Realtime quantization: per-linear SQNR{' [RANDOM WEIGHTS]' if random_weights else ''}",
        "",
        f"- date: {info['date']}; commit: {info['commit']}; torch {info['torch']}",
        f"- command: `{info['command']}`",
        f"- machine: CPU ({_cpu_name()}), {torch.get_num_threads()} threads, fp32",
        f"- model: {model_line}",
        (f"- calibration (smoothing amax): one CFG batch of {', '.join(CALIBRATION_WORKLOADS)} "
         f"({report.calibration_positions} prompt positions)"),
        (f"- evaluation: ANOTHER CFG batch, {', '.join(EVALUATION_WORKLOADS)} (other texts, other reference "
         f"tokens); {report.evaluated_positions} of its {report.evaluation_positions} prompt positions, evenly spaced"),
        ("- reference audio tokens are random; prompts are laid out as the engine does "
         "(style + text + reference audio + MASK target, CFG cond and uncond rows)"),
        *([f"- **{RANDOM_NOTE}**"] if random_weights else []),
        "",
        "## Output SQNR of each linear vs fp32 (dB, higher is better)",
        "",
        (f"W4A4 = INT4 weights and activations, groups of {GROUP}; smoothing alpha {SVDQUANT.smooth_alpha}; "
         f"W8A8 rows are smoothed too (as shipped). '-' = the scheme cannot take this shape."),
        "",
        sqnr_table(report.rows),
        "",
        "## Sensitivity: logits cosine to fp32 with only this layer SVDQuant W4A4",
        "",
        sensitivity_table(report.cosines),
        "",
        "## Suggested mixed precision",
        "",
        f"`{_config_expr(cfg)}`",
        "",
        *([f"- {r}" for r in reasons] or ["- no measured layer or linear stands out: all W4A4 (the shipped default)"]),
        (f"- rules: a layer whose 1 - cos is over {LAYER_FACTOR:g}x the median of the measured layers, or a "
         f"linear whose SVDQuant SQNR is over {LINEAR_DROP_DB:g} dB below the median of its kind, goes W8A8 "
         f"if int8 keeps it at {W8A8_ENOUGH_DB:g} dB or more, else FP16"),
        f"- only layers {', '.join(map(str, report.layers))} were measured",
        "",
    ])


def main(args, model: str | None) -> int:
    from engine.lm.checkpoint import load_lm, load_text_tokenizer, resolve_checkpoint
    from tools.bench import stamp
    from tools.bench_modes import ensure_random_checkpoint

    start = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f} s] {message}", file=sys.stderr, flush=True)

    if args.random_weights and model is None:
        model = ensure_random_checkpoint()
    folder = resolve_checkpoint(model)
    lm = load_lm(folder, "cpu", torch.float32)
    report = measure(lm, load_text_tokenizer(folder), _layers(args.layers, lm.cfg.num_layers), args.tokens, progress)
    info = stamp(torch.device("cpu"), args.random_weights, "python launcher.py " + " ".join(sys.argv[1:]))
    model_line = f"{folder} ({lm.cfg.num_layers} layers, hidden {lm.cfg.hidden_size})"
    text = render(report, info, model_line, args.random_weights)
    print(text)
    if args.out:
        from engine.fileio import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


def _config_expr(cfg: QuantConfig) -> str:
    parts = [f"{field}={getattr(cfg, field)!r}" for field in ("w8a8", "keep_fp16") if getattr(cfg, field)]
    return f"QuantConfig({', '.join(parts)})"
