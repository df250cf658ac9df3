"""One verb, `quantize_(model, QuantConfig(), calibration_fn)`: it records the per-channel input maxima of
every `qkv_proj`, `o_proj`, `gate_up_proj` and `down_proj` linear while `calibration_fn(model)` runs,
then swaps them for `W4A4Linear.from_linear(...)` (or the scheme the config names for the layer).
Converted models are saved as safetensors whose metadata carries the quant config and the layer
plan, so loading never guesses from a file name.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from engine.errors import CheckpointError, VoiceDeskError
from engine.fileio import atomic_write
from engine.quant.config import TARGET_NAMES, QuantConfig
from engine.quant.linears import QUANTIZED_LINEARS

FILE_FORMAT = "voicedesk-quantized/1"


def target_linears(model: nn.Module) -> dict[str, nn.Linear]:
    return {name: m for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in TARGET_NAMES}


def replace_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)


def record_input_amax(model: nn.Module, linears: dict[str, nn.Linear],
                      calibration_fn: Callable[[nn.Module], None]) -> dict[str, torch.Tensor]:
    """Max |x| of each input channel (fp32 [K]) of every named linear that ran while
    `calibration_fn(model)` did: the calibration statistic the smoothing factors are made from."""
    amax: dict[str, torch.Tensor] = {}

    def record(name, module, inputs, output):
        x = inputs[0].detach().reshape(-1, module.in_features)
        seen = x.abs().amax(dim=0).float()  # [K]
        amax[name] = seen if name not in amax else torch.maximum(amax[name], seen)

    hooks = [linear.register_forward_hook(functools.partial(record, name)) for name, linear in linears.items()]
    try:
        with torch.no_grad():
            calibration_fn(model)
    finally:
        for hook in hooks:
            hook.remove()
    return amax


def quantize_(model: nn.Module, cfg: QuantConfig, calibration_fn: Callable[[nn.Module], None]) -> dict[str, str]:
    """Calibrate and swap the model's projection linears in place.

    Parameters
    ----------
    model : nn.Module
        Any module whose projection linears are named `qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`.
    cfg : QuantConfig
        Rank, smoothing and the per-layer exceptions.
    calibration_fn : Callable[[nn.Module], None]
        Runs representative forwards of `model`; the input max of every target channel is recorded.

    Returns
    -------
    dict[str, str]
        The plan: module name -> 'w4a4', 'w8a8' or 'fp16' (left as it was).
    """
    linears = target_linears(model)
    plan = {name: cfg.scheme(name, linear) for name, linear in linears.items()}
    converted = {name: linears[name] for name, scheme in plan.items() if scheme != "fp16"}
    amax = record_input_amax(model, converted, calibration_fn)
    missed = [name for name in converted if name not in amax]
    if missed:
        raise VoiceDeskError(f"calibration never ran these layers, so they cannot be quantized: {missed[:5]}")
    for name, linear in converted.items():
        replace_module(model, name, QUANTIZED_LINEARS[plan[name]].from_linear(linear, amax.pop(name), cfg))
    return plan


def quantization_plan(model: nn.Module) -> dict[str, str]:
    """Module name -> 'w4a4' / 'w8a8' for every quantized linear in `model`."""
    kinds = {cls: scheme for scheme, cls in QUANTIZED_LINEARS.items()}
    return {name: kinds[type(m)] for name, m in model.named_modules() if type(m) in kinds}


def save_quantized(model: nn.Module, path: str | Path, cfg: QuantConfig, source_hash: str) -> None:
    """Write the converted model's state dict as safetensors, with the config, the layer plan and the
    hash of the weights it was made from in the file's metadata."""
    from safetensors.torch import save_model

    metadata = {"format": FILE_FORMAT, "quant_config": cfg.to_json(),
                "layers": json.dumps(quantization_plan(model), sort_keys=True), "source_hash": source_hash}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: save_model(model, tmp, metadata=metadata))


def load_quantized(model: nn.Module, path: str | Path, source_hash: str | None = None,
                   device: torch.device | str | None = None) -> QuantConfig:
    """Swap in the quantized linears named in the file's metadata and load its state dict into `model`.

    `model` is the plain model (its weights may live on the meta device). Raises CheckpointError if
    the file is not a VoiceDesk quantized model or was made from weights other than `source_hash`.
    """
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as e:  # any unreadable file means the same to the user
        raise CheckpointError(f"{path} cannot be read as a safetensors file ({e})") from e
    if metadata.get("format") != FILE_FORMAT:
        raise CheckpointError(f"{path} is not a VoiceDesk quantized model (no '{FILE_FORMAT}' metadata)")
    if source_hash is not None and metadata.get("source_hash") != source_hash:
        raise CheckpointError(f"{path} was made from other model weights; delete it to quantize again")
    cfg = QuantConfig.from_json(metadata["quant_config"])
    for name, scheme in json.loads(metadata["layers"]).items():
        replace_module(model, name, QUANTIZED_LINEARS[scheme].empty_like(model.get_submodule(name), cfg))
    if device is None:
        first = next(model.parameters(), None)
        device = "cpu" if first is None or first.is_meta else first.device
    model.load_state_dict(load_file(str(path), device=str(device)), strict=True, assign=True)
    return cfg
