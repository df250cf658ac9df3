"""Realtime mode's quantization: which scheme runs on this GPU (W4A4 on INT4 tensor cores; W8A8 FP8 on
GPUs without them: Hopper, Blackwell), and the cached conversion of a checkpoint."""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from engine.errors import VoiceDeskError
from engine.folders import user_folders
from engine.quant.api import load_quantized, quantize_, save_quantized
from engine.quant.config import TARGET_NAMES, QuantConfig
from engine.quant.linears import FP8_LABELS, W4A4Linear, W8A8FP8Linear, W8A8Linear
from kernels import fp8, w4a4_cuda

log = logging.getLogger(__name__)


def checkpoint_fingerprint(folder: Path) -> str:
    """A cheap identity of a checkpoint's LM weights: names, sizes and modification times."""
    files = sorted(Path(folder).glob("*.safetensors"))
    text = "\n".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def synthetic_calibration(lm: nn.Module, batches: int = 4, seq_len: int = 256, seed: int = 0) -> None:
    """Forwards of the OmniVoice LM over random text + audio tokens at several mask ratios.

    Stands in for real prompts until a calibration set exists: it covers the embedding statistics of
    text, audio and [MASK] rows, and the per-token activation scales adapt at run time anyway.
    """
    cfg = lm.cfg
    device = next(lm.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    text_len = seq_len // 4
    audio_mask = (torch.arange(seq_len) >= text_len).expand(2, seq_len)  # [B, S]
    attn_mask = torch.ones(2, 1, seq_len, seq_len, dtype=torch.bool)
    for b in range(batches):
        ids = torch.randint(0, cfg.audio_mask_id, (2, cfg.num_codebooks, seq_len), generator=gen)
        ids[:, :, :text_len] = torch.randint(0, cfg.vocab_size, (2, 1, text_len), generator=gen)
        masked = torch.rand(2, 1, seq_len, generator=gen) < (b + 1) / (batches + 1)
        ids = torch.where(masked & audio_mask[:, None], cfg.audio_mask_id, ids)
        lm(ids.to(device), audio_mask.to(device), attn_mask.to(device))


REALTIME_ENV = "VOICEDESK_REALTIME"  # "auto" (default), "w4a4" or "fp8"
NO_INT4_NOTE = "no INT4 tensor cores on this GPU"


# Which linears Realtime runs in FP8 on GPUs without INT4 tensor cores (the others stay FP16): the one switch,
# flipped by measurement (`python -m tools.kernels.bench_fp8_layer` times the layer's chains and the model's step
# for each choice). qkv_proj and gate_up_proj pay: the fused norms quantize their inputs in their own pass.
# o_proj and down_proj (1024 outputs) can run as unit-scale products (the residual add + RMSNorm after them applies
# the scales; down_proj's input quantized by the fused SwiGLU, o_proj's by its own quantize kernel), but the
# quantizers cost more than FP8 saves there: the model's step at 896 rows 2.370 ms today, 2.386 with down_proj,
# 2.459 with o_proj, 2.469 with all four (H100, BENCHMARKS.md 2026-12-06; H200 2026-12-04 likewise).
FP8_LINEARS = ("*.qkv_proj", "*.gate_up_proj")


def fp8_config(fp8_linears: tuple[str, ...] = FP8_LINEARS) -> QuantConfig:
    """Realtime's FP8 config: `fp8_linears` in W8A8 FP8, the LM's other projections kept FP16."""
    keep = tuple(f"*.{name}" for name in TARGET_NAMES if f"*.{name}" not in fp8_linears)
    return QuantConfig(fp8=fp8_linears, keep_fp16=keep)


def realtime_scheme(*, int4_native: bool, fp8_ok: bool, choice: str = "auto") -> str:
    """'w4a4' or 'fp8': what realtime mode quantizes to on a GPU, given whether W4A4 runs there on INT4
    tensor cores (`w4a4_cuda.is_supported`), whether the FP8 path runs there, and the user's `choice`.

    W4A4 runs on INT4 tensor cores on sm_80/86/89 (A100, RTX 30, L4 / RTX 40). Hopper (sm_90) and Blackwell
    (sm_100, RTX 50's sm_120) have none: W4A4 there is an int8 emulation in Triton, 8-13x fp16's time
    per down_proj call on an H200 (quantizer + GEMM, 256-1024 rows), so "auto" takes W8A8 FP8 wherever it
    runs and W4A4 is not native. "w4a4" forces W4A4 and "fp8" forces FP8 wherever it runs.
    """
    if choice not in ("auto", "w4a4", "fp8"):
        raise VoiceDeskError(f"{REALTIME_ENV}={choice!r}: choose auto, w4a4 or fp8")
    wants_fp8 = choice == "fp8" or (choice == "auto" and not int4_native)
    if wants_fp8 and not fp8_ok:
        log.warning("W8A8 FP8 does not run on this device (it needs sm_89+, Triton and torch._scaled_mm): "
                    "realtime mode uses W4A4")
    return "fp8" if wants_fp8 and fp8_ok else "w4a4"


def realtime_config(device: torch.device) -> QuantConfig:
    """The quant config of realtime mode on `device` (see `realtime_scheme`; env VOICEDESK_REALTIME); W4A4
    (its PyTorch reference) without a GPU."""
    if device.type != "cuda":
        return QuantConfig()
    choice = os.environ.get(REALTIME_ENV, "auto").strip().lower() or "auto"
    scheme = realtime_scheme(int4_native=w4a4_cuda.is_supported(device), fp8_ok=fp8.fp8_supported(device),
                             choice=choice)
    if scheme == "fp8":
        return fp8_config()
    return QuantConfig()


def backend_label(model: nn.Module) -> str:
    """What runs the quantized linears of `model`, for the UI, e.g. "W4A4 INT4-MMA" or
    "W8A8 FP8 (no INT4 tensor cores on this GPU)"."""
    layers = [m for m in model.modules() if isinstance(m, (W4A4Linear, W8A8FP8Linear, W8A8Linear))]
    labels = sorted({m.backend_label() for m in layers})
    label = " + ".join(labels) or "FP16 (no layer quantized)"
    no_int4 = any(m.qweight.is_cuda and w4a4_cuda.arch_of(m.qweight.device) not in w4a4_cuda.NATIVE_INT4_ARCHS
                  for m in layers)
    if no_int4 and FP8_LABELS["scaled_mm"] in labels:
        label += f" ({NO_INT4_NOTE})"
    return label


def conversion_path(folder: Path, cfg: QuantConfig, dtype: torch.dtype) -> Path:
    """The cache file of `folder`'s LM converted by `cfg` from `dtype` weights: its name hashes the
    checkpoint's fingerprint, every field of `cfg` and the dtype, so no other conversion is ever loaded."""
    key = hashlib.sha256(f"{checkpoint_fingerprint(folder)}:{cfg.to_json()}:{dtype}".encode()).hexdigest()[:20]
    kind = "fp8" if cfg.fp8 else "w4a4"
    return user_folders().cache / "quantized" / f"omnivoice-{kind}-{key}.safetensors"


def quantize_for_realtime(lm: nn.Module, folder: Path, report: Callable[[float, str], None],
                          cfg: QuantConfig | None = None) -> str:
    """Put the LM in realtime mode: load the cached conversion of this checkpoint, or make it.

    `cfg` defaults to `realtime_config` of the LM's device: W4A4, or W8A8 FP8 where INT4 is not native. Returns the
    backend label for the UI, e.g. "W4A4 INT4-MMA" or "W8A8 FP8 (no INT4 tensor cores on this GPU)".
    """
    first = next(lm.parameters())
    cfg = cfg or realtime_config(first.device)
    kind = "fp8" if cfg.fp8 else "w4a4"
    name = {"fp8": "W8A8 FP8", "w4a4": "W4A4"}[kind]
    source_hash = checkpoint_fingerprint(folder)
    path = conversion_path(folder, cfg, first.dtype)
    if path.exists():
        report(0.0, f"loading the {name} model")
        load_quantized(lm, path, source_hash)
    else:
        report(0.0, f"calibrating and converting to {name} (once per checkpoint)")
        quantize_(lm, cfg, synthetic_calibration)
        report(0.9, f"saving the {name} model")
        save_quantized(lm, path, cfg, source_hash)
    report(1.0, f"{name} ready")
    return backend_label(lm)
