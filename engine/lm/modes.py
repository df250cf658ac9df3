"""What each quality mode means on this device: which model path runs, and its name for the UI."""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch

from engine.config import GenerationConfig, Mode
from engine.lm.budget import MemoryBudget

log = logging.getLogger(__name__)

Report = Callable[[str, float, str], None]  # (stage, fraction, message)

CUBLASLT_WORKSPACE_ENV = "CUBLASLT_WORKSPACE_SIZE"  # KiB; PyTorch reads it once, at the process's first cuBLASLt call


def pick_device(device: str | torch.device) -> torch.device:
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def settle_cublaslt_workspace() -> None:
    """Give cuBLASLt no workspace, unless the user chose one. With a workspace, cuBLASLt runs Realtime's FP8 GEMMs
    (`torch._scaled_mm`) as kernels that need it zeroed: a memset before each GEMM, and the GPU idle ~4 us around
    it; without, it picks their stream-scheduled variants, which need none (2.3-2.6 us less per call at 896 rows,
    H100; fp16 `F.linear` goes through cuBLAS, not cuBLASLt, and is unchanged: BENCHMARKS.md, "cuBLASLt without a
    workspace"). Call it before the process's first GEMM on the GPU."""
    os.environ.setdefault(CUBLASLT_WORKSPACE_ENV, "0")


def runs_as(mode: Mode, device: torch.device) -> Mode:
    """The path `mode` takes on `device`: without CUDA every mode runs the eager reference path."""
    return mode if device.type == "cuda" else Mode.EAGER


def device_label(device: torch.device) -> str:
    if device.type != "cuda":
        return "CPU"
    major, minor = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)}, sm_{major}{minor}"


def quantized_kernels_run(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether Realtime's quantized linears run on a kernel on this GPU (the CUDA INT4 GEMM, or Triton's: W4A4 and
    W8A8 FP8 both need Triton elsewhere) rather than on the float64 W4A4 reference, far slower than fp16: what a GPU
    without INT4 tensor cores (H100, RTX 50) would get from a PyTorch without Triton, as pip's CUDA builds for Windows
    are."""
    from engine.quant import QuantConfig
    from engine.quant.linears import select_backend

    return select_backend(device, dtype, QuantConfig().rank) != "ref"


NO_QUANTIZED_KERNEL = "Realtime runs High fidelity's path: no quantized kernel runs on this GPU without Triton"


def prepare_mode(lm, mode: Mode, device: torch.device, folder: Path, report: Report, budget: MemoryBudget):
    """Set up `mode` for `lm` in place; return (runner or None, backend description). The runner's
    buckets are those whose step fits `budget`."""
    dtype = str(next(lm.parameters()).dtype).removeprefix("torch.").upper().replace("FLOAT", "FP")
    where = device_label(device)
    if runs_as(mode, device) is Mode.EAGER:
        if mode is not Mode.EAGER:
            log.warning("%s mode needs an NVIDIA GPU; running the eager path on the %s", mode.value, where)
        return None, f"{dtype} eager ({where})"
    from engine.lm.runner import DEFAULT_BUCKETS, StaticRunner, freeze_heap
    from kernels import triton_available

    fused = triton_available()
    if not fused:
        log.warning("Triton is not available: CUDA graphs without fused kernels")
    if mode is Mode.REALTIME and quantized_kernels_run(device, next(lm.parameters()).dtype):
        from engine.quant import quantize_for_realtime

        backend = quantize_for_realtime(lm, folder, lambda f, m: report("quantize", f, m))
    else:
        backend = f"{dtype} {'fused + ' if fused else ''}CUDA graphs"
        if mode is Mode.REALTIME:
            log.warning(NO_QUANTIZED_KERNEL)
            backend += f"; {NO_QUANTIZED_KERNEL}"
    if fused:
        lm.use_fused_kernels()
    runner = StaticRunner(lm, buckets=budget.buckets(DEFAULT_BUCKETS), fused=fused)
    runner.capture(GenerationConfig(), lambda f, m: report("capture", f, m))
    freeze_heap()
    return runner, f"{backend} ({where})"
