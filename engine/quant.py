"""Realtime mode's quantization: SVDQuant W4A4 linears, W8A8 FP8 linears (the realtime backend on
Hopper, which has no INT4 tensor cores) and int8 W8A8 ones for sensitive layers.

One verb, `quantize_(model, W4A4Config(), calibration_fn)`: it records the per-channel input maxima of
every `qkv_proj`, `o_proj`, `gate_up_proj` and `down_proj` linear while `calibration_fn(model)` runs,
then swaps them for `W4A4Linear.from_linear(...)` (or the scheme the config names for the layer).
Converted models are saved as safetensors whose metadata carries the quant config and the layer
plan, so loading never guesses from a file name. Numerics: `kernels/w4a4_ref.py` and
`kernels/fp8_ref.py` (the contracts every backend matches).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from engine.errors import CheckpointError, VoiceDeskError
from kernels import fp8, w4a4_cuda
from kernels._triton import HAS_TRITON
from kernels.fp8_ref import FP8_DTYPE, fp8_linear_ref, quantize_rows_fp8_ref
from kernels.w4a4_ref import (
    GROUP,
    pack_int4,
    quantize_act_lowrank_ref,
    quantize_groups_ref,
    w4a4_linear_ref,
)

log = logging.getLogger(__name__)

TARGET_NAMES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
FILE_FORMAT = "voicedesk-quantized/1"
W4A4_LABELS = {"cuda": "W4A4 INT4-MMA", "ref": "W4A4 PyTorch reference"}  # Triton's names its MMA
FP8_LABELS = {"scaled_mm": "W8A8 FP8", "ref": "W8A8 FP8 PyTorch reference"}
FP8_ALIGN = 16  # _scaled_mm needs K and N to be multiples of 16


@dataclass(frozen=True)
class W4A4Config:
    """How to quantize: SVDQuant rank and smoothing, and which layers stay 16-bit or go W8A8.

    `keep_fp16`, `w8a8` (int8) and `fp8` (W8A8 FP8) are fnmatch patterns on module names (e.g.
    "layers.0.*", "*.down_proj"; `fp8=("*",)` makes a whole-model FP8 config). `smooth_alpha=None`
    turns smoothing off and `rank=0` the W4A4 low-rank branch (plain RTN W4A4; the GPU kernels need a
    rank that is a multiple of 16). FP8 layers have their own low-rank branch, off by default
    (`fp8_rank=0`): 8-bit activations need no help from it.
    """

    rank: int = 32
    group_size: int = GROUP
    smooth_alpha: float | None = 0.5
    keep_fp16: tuple[str, ...] = ()
    w8a8: tuple[str, ...] = ()
    fp8: tuple[str, ...] = ()
    fp8_rank: int = 0

    def __post_init__(self):
        if self.group_size != GROUP:
            raise ValueError(f"group_size must be {GROUP}: the numerics contract and the kernels are built for it")
        if self.rank < 0 or self.fp8_rank < 0:
            raise ValueError(f"ranks must be >= 0, got rank={self.rank}, fp8_rank={self.fp8_rank}")
        for patterns in ("keep_fp16", "w8a8", "fp8"):
            object.__setattr__(self, patterns, tuple(getattr(self, patterns)))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> W4A4Config:
        return cls(**json.loads(text))

    def scheme(self, name: str, linear: nn.Linear) -> str:
        """'fp16', 'w8a8', 'fp8' or 'w4a4' for the linear called `name` (shapes a kernel cannot take stay fp16)."""
        if any(fnmatch.fnmatchcase(name, p) for p in self.keep_fp16):
            return "fp16"
        if any(fnmatch.fnmatchcase(name, p) for p in self.w8a8):
            return "w8a8"
        if any(fnmatch.fnmatchcase(name, p) for p in self.fp8):
            aligned = linear.in_features % FP8_ALIGN == 0 and linear.out_features % FP8_ALIGN == 0
            return "fp8" if aligned else "fp16"
        return "w4a4" if linear.in_features % GROUP == 0 else "fp16"


def sqnr_db(ref: torch.Tensor, test: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio of `test` against `ref`, in dB (computed in fp64)."""
    ref64, test64 = ref.detach().double(), test.detach().double()
    noise = (ref64 - test64).pow(2).sum()
    return float(10 * torch.log10(ref64.pow(2).sum() / noise))


def smoothing_factors(act_amax: torch.Tensor, weight: torch.Tensor, alpha: float | None) -> torch.Tensor:
    """SmoothQuant/SVDQuant lambda_j = max|X_j|^a / max|W_:,j|^(1-a) per input channel j, fp32 [K].

    Dividing x by lambda and multiplying W's columns by it leaves x W^T unchanged while moving
    activation outliers into the weights, where the low-rank branch absorbs them.
    """
    k = weight.shape[1]
    if alpha is None:
        return torch.ones(k, dtype=torch.float32, device=weight.device)
    a = act_amax.float().to(weight.device).clamp_min(1e-5)  # dead channels must not give 0 or inf
    w = weight.float().abs().amax(dim=0).clamp_min(1e-5)
    return (a.pow(alpha) / w.pow(1 - alpha)).clamp(1e-4, 1e4)


@functools.cache
def select_backend(device: torch.device, dtype: torch.dtype, rank: int) -> str:
    """'cuda' (INT4 tensor cores, sm_80/86/89), 'triton' (int8 MMA: sm_90, sm_12x, ...) or 'ref'."""
    if device.type != "cuda":
        return "ref"
    if dtype == torch.float16 and rank > 0 and rank % 16 == 0 and w4a4_cuda.is_supported(device):
        return "cuda"
    if HAS_TRITON and rank in (16, 32, 64, 128):
        return "triton"
    return "ref"


def _split_low_rank(w_smooth: torch.Tensor, lora_down: torch.Tensor, lora_up: torch.Tensor) -> torch.Tensor:
    """Fill lora_down [K, R] and lora_up [N, R] with the top-R SVD of w_smooth [N, K] (zero columns past
    min(N, K)); return the residual w_smooth - lora_up lora_down^T, fp32, that the low-bit weights hold."""
    lora_down.zero_()
    lora_up.zero_()
    if lora_down.shape[1] > 0:
        u, s, vh = torch.linalg.svd(w_smooth, full_matrices=False)
        rank = min(lora_down.shape[1], s.numel())
        root = s[:rank].sqrt()  # split the singular values evenly so both factors suit fp16
        lora_down[:, :rank] = vh[:rank].t() * root  # [K, r]
        lora_up[:, :rank] = u[:, :rank] * root  # [N, r]
    # The residual is taken against the rounded factors, so it also absorbs their rounding.
    return w_smooth - lora_up.float() @ lora_down.float().t()


class W4A4Linear(nn.Module):
    """SVDQuant W4A4 linear: y = Q4(x / lambda) Q4(R)^T + (x / lambda) L1 L2 + b, R = W diag(lambda) - L1 L2.

    Buffers: `smooth` lambda [K] fp32, `qweight` [N, K/2] int8 (packed INT4, group-halves), `wscales`
    [N, K/64] fp32, `lora_down` L1 [K, R] and `lora_up` L2^T [N, R] in the model dtype, `bias` [N].
    """

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool,
                 dtype: torch.dtype = torch.float16, device: torch.device | str | None = None):
        super().__init__()
        if in_features % GROUP:
            raise ValueError(f"in_features = {in_features} is not a multiple of {GROUP}")
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.backend: str | None = None  # None: chosen from the device; or force "ref" / "triton" / "cuda"
        make = functools.partial(torch.empty, device=device)
        self.register_buffer("smooth", make(in_features, dtype=torch.float32))
        self.register_buffer("qweight", make(out_features, in_features // 2, dtype=torch.int8))
        self.register_buffer("wscales", make(out_features, in_features // GROUP, dtype=torch.float32))
        self.register_buffer("lora_down", make(in_features, rank, dtype=dtype))
        self.register_buffer("lora_up", make(out_features, rank, dtype=dtype))
        self.register_buffer("bias", make(out_features, dtype=dtype) if bias else None)
        self._codes, self._codes_key = None, None  # the Triton GEMM's copy of qweight, see _mma_weight_codes

    @classmethod
    def empty_like(cls, linear: nn.Linear, cfg: W4A4Config) -> W4A4Linear:
        return cls(linear.in_features, linear.out_features, cfg.rank, linear.bias is not None,
                   linear.weight.dtype, linear.weight.device)

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear, act_amax: torch.Tensor, cfg: W4A4Config) -> W4A4Linear:
        """Convert `linear` given the max |x| of each input channel seen during calibration ([K])."""
        layer = cls.empty_like(linear, cfg)
        smooth = smoothing_factors(act_amax, linear.weight.float(), cfg.smooth_alpha)
        residual = _split_low_rank(linear.weight.float() * smooth, layer.lora_down, layer.lora_up)  # [N, K]
        codes, scales = quantize_groups_ref(residual)
        layer.smooth.copy_(smooth)
        layer.qweight.copy_(pack_int4(codes))
        layer.wscales.copy_(scales)
        if linear.bias is not None:
            layer.bias.copy_(linear.bias)
        return layer

    def backend_name(self) -> str:
        """The backend forward() uses on this module's device: 'cuda', 'triton' or 'ref'."""
        return self.backend or select_backend(self.qweight.device, self.lora_up.dtype, self.rank)

    def backend_label(self) -> str:
        """'W4A4 INT4-MMA', 'W4A4 e4m3-MMA Triton', 'W4A4 int8-MMA Triton' or 'W4A4 PyTorch reference'."""
        backend = self.backend_name()
        if backend == "triton":
            from kernels.w4a4_triton import mma_layout

            return f"W4A4 {mma_layout(self.qweight.device)}-MMA Triton"
        return W4A4_LABELS[backend]

    def _mma_weight_codes(self, layout: str) -> torch.Tensor:
        """qweight one code per byte, as the Triton GEMM reads it: made on first use (during warm-up, before
        any CUDA graph capture) and again whenever qweight is replaced or changed; not in the state dict."""
        from kernels.w4a4_triton import weight_codes

        key = (self.qweight.data_ptr(), self.qweight._version, layout)
        if self._codes_key != key:
            self._codes, self._codes_key = weight_codes(self.qweight, layout), key
        return self._codes

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        backend = self.backend_name()
        if backend == "ref":
            return w4a4_linear_ref(x, self, residual)
        x2 = x.reshape(-1, self.in_features)  # [M, K]
        res2 = None if residual is None else residual.reshape(-1, self.out_features)
        if backend == "cuda":
            if HAS_TRITON:
                from kernels.w4a4_triton import quantize_act

                act = quantize_act(x2, self.smooth, self.lora_down, layout="packed")
            else:  # e.g. Windows without Triton: the same codes from plain PyTorch ops
                act = quantize_act_lowrank_ref(x2, self.smooth, self.lora_down)
            y = w4a4_cuda.w4a4_gemm_cuda(act, self.qweight, self.wscales, self.lora_up, self.bias, res2,
                                         out_dtype=x.dtype)
        else:
            from kernels.w4a4_triton import mma_layout, quantize_act, w4a4_gemm

            layout = mma_layout(x.device)
            act = quantize_act(x2, self.smooth, self.lora_down, layout=layout)
            y = w4a4_gemm(act, self._mma_weight_codes(layout), self.wscales, self.lora_up, self.bias, res2,
                          out_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}"


def _int8_matmul(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Exact a [M, K] int8 @ w [N, K]^T -> int32 [M, N]."""
    if not a.is_cuda:
        return torch._int_mm(a, w.t())
    if a.shape[1] % 8 or w.shape[0] % 8:  # cuBLAS int8 shapes; fp64 is exact here (|sum| < 2^53)
        return (a.double() @ w.double().t()).to(torch.int32)
    pad = max(0, 17 - a.shape[0])  # torch._int_mm on CUDA needs more than 16 rows
    return torch._int_mm(F.pad(a, (0, 0, 0, pad)), w.t())[: a.shape[0]]


class W8A8Linear(nn.Module):
    """Smoothed W8A8 linear for layers INT4 activations garble: per-token int8 activations (scale =
    amax / 127) times per-output-channel int8 weights, int32 accumulation, fp32 rescale + bias."""

    def __init__(self, in_features: int, out_features: int, bias: bool,
                 dtype: torch.dtype = torch.float16, device: torch.device | str | None = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        make = functools.partial(torch.empty, device=device)
        self.register_buffer("smooth", make(in_features, dtype=torch.float32))
        self.register_buffer("qweight", make(out_features, in_features, dtype=torch.int8))
        self.register_buffer("wscales", make(out_features, dtype=torch.float32))
        self.register_buffer("bias", make(out_features, dtype=dtype) if bias else None)

    @classmethod
    def empty_like(cls, linear: nn.Linear, cfg: W4A4Config) -> W8A8Linear:
        return cls(linear.in_features, linear.out_features, linear.bias is not None,
                   linear.weight.dtype, linear.weight.device)

    @staticmethod
    def _quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scales = t.abs().amax(dim=1) / 127  # [R]
        safe = torch.where(scales > 0, scales, torch.ones_like(scales))
        return torch.round(t / safe[:, None]).clamp_(-127, 127).to(torch.int8), scales

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear, act_amax: torch.Tensor, cfg: W4A4Config) -> W8A8Linear:
        layer = cls.empty_like(linear, cfg)
        smooth = smoothing_factors(act_amax, linear.weight, cfg.smooth_alpha)
        codes, scales = cls._quantize_rows(linear.weight.float() * smooth)
        layer.smooth.copy_(smooth)
        layer.qweight.copy_(codes)
        layer.wscales.copy_(scales)
        if linear.bias is not None:
            layer.bias.copy_(linear.bias)
        return layer

    def backend_name(self) -> str:
        return "torch-int8"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features).float() / self.smooth  # [M, K]
        codes, scales = self._quantize_rows(x2)
        y = _int8_matmul(codes, self.qweight).float() * scales[:, None] * self.wscales  # [M, N]
        if self.bias is not None:
            y += self.bias.float()
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


class W8A8FP8Linear(nn.Module):
    """Smoothed W8A8 FP8 linear: y = Q8(x / lambda) Q8(R)^T + (x / lambda) L1 L2 + b, R = W diag(lambda) - L1 L2,
    with e4m3 codes, per-token dynamic activation scales and per-output-channel weight scales.

    Buffers: `smooth` lambda [K] fp32, `qweight` [N, K] float8_e4m3fn, `wscales` [N] fp32, `bias` [N], and
    with `rank` > 0 `lora_down` L1 [K, R] and `lora_up` L2^T [N, R] in the model dtype (else None).
    On GPUs with FP8 tensor cores forward() is one Triton quantize kernel and one `torch._scaled_mm`
    (graph-capturable); elsewhere it is the fp32 reference (`kernels/fp8_ref.py`).
    """

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool,
                 dtype: torch.dtype = torch.float16, device: torch.device | str | None = None):
        super().__init__()
        if in_features % FP8_ALIGN or out_features % FP8_ALIGN:
            raise ValueError(f"FP8 linears need sizes that are multiples of {FP8_ALIGN}, "
                             f"got {in_features} -> {out_features}")
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.backend: str | None = None  # None: chosen from the device; or force "ref" / "scaled_mm"
        make = functools.partial(torch.empty, device=device)
        self.register_buffer("smooth", make(in_features, dtype=torch.float32))
        self.register_buffer("qweight", make(out_features, in_features, dtype=FP8_DTYPE))
        self.register_buffer("wscales", make(out_features, dtype=torch.float32))
        self.register_buffer("lora_down", make(in_features, rank, dtype=dtype) if rank else None)
        self.register_buffer("lora_up", make(out_features, rank, dtype=dtype) if rank else None)
        self.register_buffer("bias", make(out_features, dtype=dtype) if bias else None)

    @classmethod
    def empty_like(cls, linear: nn.Linear, cfg: W4A4Config) -> W8A8FP8Linear:
        return cls(linear.in_features, linear.out_features, cfg.fp8_rank, linear.bias is not None,
                   linear.weight.dtype, linear.weight.device)

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear, act_amax: torch.Tensor, cfg: W4A4Config) -> W8A8FP8Linear:
        """Convert `linear` given the max |x| of each input channel seen during calibration ([K])."""
        layer = cls.empty_like(linear, cfg)
        smooth = smoothing_factors(act_amax, linear.weight.float(), cfg.smooth_alpha)
        w_smooth = linear.weight.float() * smooth  # [N, K]
        if layer.rank:
            w_smooth = _split_low_rank(w_smooth, layer.lora_down, layer.lora_up)
        codes, scales = quantize_rows_fp8_ref(w_smooth)
        layer.smooth.copy_(smooth)
        layer.qweight.copy_(codes)
        layer.wscales.copy_(scales)
        if linear.bias is not None:
            layer.bias.copy_(linear.bias)
        return layer

    def backend_name(self) -> str:
        """'scaled_mm' (Triton quantizer + torch._scaled_mm, FP8 tensor cores) or 'ref'."""
        if self.backend:
            return self.backend
        return "scaled_mm" if fp8.fp8_supported(self.qweight.device) else "ref"

    def backend_label(self) -> str:
        return FP8_LABELS[self.backend_name()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.backend_name() == "ref":
            return fp8_linear_ref(x, self)
        x2 = x.reshape(-1, self.in_features)  # [M, K]
        y = fp8.fp8_linear(x2, self.smooth, self.qweight, self.wscales, self.bias)  # [M, N]
        if self.lora_down is not None:  # off by default: plain torch ops are enough for an option
            xs = x2.float() / self.smooth
            y += ((xs @ self.lora_down.float()) @ self.lora_up.float().t()).to(y.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}"


QUANTIZED_LINEARS = {"w4a4": W4A4Linear, "w8a8": W8A8Linear, "fp8": W8A8FP8Linear}


def _target_linears(model: nn.Module) -> dict[str, nn.Linear]:
    return {name: m for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in TARGET_NAMES}


def _replace(model: nn.Module, name: str, module: nn.Module) -> None:
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


def quantize_(model: nn.Module, cfg: W4A4Config, calibration_fn: Callable[[nn.Module], None]) -> dict[str, str]:
    """Calibrate and swap the model's projection linears in place.

    Parameters
    ----------
    model : nn.Module
        Any module whose projection linears are named `qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`.
    cfg : W4A4Config
        Rank, smoothing and the per-layer exceptions.
    calibration_fn : Callable[[nn.Module], None]
        Runs representative forwards of `model`; the input max of every target channel is recorded.

    Returns
    -------
    dict[str, str]
        The plan: module name -> 'w4a4', 'w8a8' or 'fp16' (left as it was).
    """
    linears = _target_linears(model)
    plan = {name: cfg.scheme(name, linear) for name, linear in linears.items()}
    converted = {name: linears[name] for name, scheme in plan.items() if scheme != "fp16"}
    amax = record_input_amax(model, converted, calibration_fn)
    missed = [name for name in converted if name not in amax]
    if missed:
        raise VoiceDeskError(f"calibration never ran these layers, so they cannot be quantized: {missed[:5]}")
    for name, linear in converted.items():
        _replace(model, name, QUANTIZED_LINEARS[plan[name]].from_linear(linear, amax.pop(name), cfg))
    return plan


def quantization_plan(model: nn.Module) -> dict[str, str]:
    """Module name -> 'w4a4' / 'w8a8' for every quantized linear in `model`."""
    kinds = {cls: scheme for scheme, cls in QUANTIZED_LINEARS.items()}
    return {name: kinds[type(m)] for name, m in model.named_modules() if type(m) in kinds}


def save_quantized(model: nn.Module, path: str | Path, cfg: W4A4Config, source_hash: str) -> None:
    """Write the converted model's state dict as safetensors, with the config, the layer plan and the
    hash of the weights it was made from in the file's metadata."""
    from safetensors.torch import save_model

    metadata = {"format": FILE_FORMAT, "quant_config": cfg.to_json(),
                "layers": json.dumps(quantization_plan(model), sort_keys=True), "source_hash": source_hash}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    save_model(model, str(tmp), metadata=metadata)
    tmp.replace(path)  # atomic: a crash never leaves a half-written file under the real name


def load_quantized(model: nn.Module, path: str | Path, source_hash: str | None = None,
                   device: torch.device | str | None = None) -> W4A4Config:
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
    cfg = W4A4Config.from_json(metadata["quant_config"])
    for name, scheme in json.loads(metadata["layers"]).items():
        _replace(model, name, QUANTIZED_LINEARS[scheme].empty_like(model.get_submodule(name), cfg))
    if device is None:
        first = next(model.parameters(), None)
        device = "cpu" if first is None or first.is_meta else first.device
    model.load_state_dict(load_file(str(path), device=str(device)), strict=True, assign=True)
    return cfg


# --- realtime mode of the engine -----------------------------------------------------------------

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
HOPPER_NOTE = "Hopper has no INT4 tensor cores"


def realtime_scheme(arch: int | None, fp8_ok: bool, choice: str = "auto") -> str:
    """'w4a4' or 'fp8': what realtime mode quantizes to on a GPU of compute capability `arch` (e.g. 90;
    None without a GPU), given whether the FP8 path runs there and the user's `choice`.

    W4A4 runs on INT4 tensor cores on sm_80/86/89. Hopper (sm_90) has none, and W8A8 FP8 is the faster
    realtime backend there; "w4a4" forces W4A4 (Triton) and "fp8" forces FP8 wherever it runs.
    """
    if choice not in ("auto", "w4a4", "fp8"):
        raise VoiceDeskError(f"{REALTIME_ENV}={choice!r}: choose auto, w4a4 or fp8")
    wants_fp8 = choice == "fp8" or (choice == "auto" and arch == 90)
    if wants_fp8 and not fp8_ok:
        log.warning("W8A8 FP8 does not run on this device (it needs sm_89+, Triton and torch._scaled_mm): "
                    "realtime mode uses W4A4")
    return "fp8" if wants_fp8 and fp8_ok else "w4a4"


def realtime_config(device: torch.device) -> W4A4Config:
    """The quant config of realtime mode on `device` (see `realtime_scheme`; env VOICEDESK_REALTIME)."""
    arch = w4a4_cuda.arch_of(device) if device.type == "cuda" else None
    choice = os.environ.get(REALTIME_ENV, "auto").strip().lower() or "auto"
    if realtime_scheme(arch, fp8.fp8_supported(device), choice) == "fp8":
        return W4A4Config(fp8=("*",))
    return W4A4Config()


def backend_label(model: nn.Module) -> str:
    """What runs the quantized linears of `model`, for the UI, e.g. "W4A4 INT4-MMA" or
    "W8A8 FP8 (Hopper has no INT4 tensor cores)"."""
    layers = [m for m in model.modules() if isinstance(m, (W4A4Linear, W8A8FP8Linear))]
    labels = sorted({m.backend_label() for m in layers})
    label = " + ".join(labels) or "FP16 (no layer quantized)"
    hopper = any(m.qweight.is_cuda and w4a4_cuda.arch_of(m.qweight.device) == 90 for m in layers)
    if hopper and FP8_LABELS["scaled_mm"] in labels:
        label += f" ({HOPPER_NOTE})"
    return label


def quantize_for_realtime(lm: nn.Module, folder: Path, report: Callable[[float, str], None],
                          cfg: W4A4Config | None = None) -> str:
    """Put the LM in realtime mode: load the cached conversion of this checkpoint, or make it.

    `cfg` defaults to `realtime_config` of the LM's device: W4A4, or W8A8 FP8 on Hopper. Returns the
    backend label for the UI, e.g. "W4A4 INT4-MMA" or "W8A8 FP8 (Hopper has no INT4 tensor cores)".
    """
    import platformdirs

    first = next(lm.parameters())
    cfg = cfg or realtime_config(first.device)
    kind = "fp8" if cfg.fp8 else "w4a4"
    name = {"fp8": "W8A8 FP8", "w4a4": "W4A4"}[kind]
    source_hash = checkpoint_fingerprint(folder)
    key = hashlib.sha256(f"{source_hash}:{cfg.to_json()}:{first.dtype}".encode()).hexdigest()[:20]
    path = Path(platformdirs.user_cache_dir("voicedesk")) / "quantized" / f"omnivoice-{kind}-{key}.safetensors"
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
