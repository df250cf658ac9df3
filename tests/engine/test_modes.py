"""What a quality mode sets up on a GPU where pieces are missing (engine/lm/modes.py): with no quantized kernel
(PyTorch without Triton, as pip's Windows builds are, on a GPU without INT4 tensor cores) Realtime runs High
fidelity's path and says so, rather than the float64 W4A4 reference inside the CUDA graphs. The GPU itself is
stood in for: the runner and the device's name are fakes, the capability gates are set per test."""
import os

import pytest
import torch
from torch import nn

from engine.config import Mode
from engine.lm import modes
from engine.lm.budget import MemoryBudget
from engine.quant import linears
from kernels import w4a4_cuda

CUDA = torch.device("cuda")


class FakeRunner:
    def __init__(self, lm, buckets, fused):
        self.fused = fused

    def capture(self, cfg, report):
        pass


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64, dtype=torch.float16)
        self.fused = False

    def use_fused_kernels(self):
        self.fused = True


@pytest.fixture
def gpu(monkeypatch):
    """A stand-in GPU without INT4 tensor cores (or NVRTC); `quantized` records the conversions."""
    from engine import quant
    from engine.lm import runner

    quantized = []
    monkeypatch.setattr(modes, "device_label", lambda device: "Stand-in GPU, sm_120")
    monkeypatch.setattr(runner, "StaticRunner", FakeRunner)
    monkeypatch.setattr(runner, "freeze_heap", lambda: None)
    monkeypatch.setattr(quant, "quantize_for_realtime", lambda lm, folder, report: quantized.append(lm) or "W4A4 x")
    monkeypatch.setattr(w4a4_cuda, "is_supported", lambda device: False)
    linears.select_backend.cache_clear()
    yield monkeypatch, quantized
    linears.select_backend.cache_clear()


def prepare(mode: Mode, *, triton: bool, monkeypatch) -> tuple[str, FakeRunner, TinyLM]:
    import kernels

    monkeypatch.setattr(linears, "HAS_TRITON", triton)
    monkeypatch.setattr(kernels, "triton_available", lambda: triton)
    lm = TinyLM()
    budget = MemoryBudget(2**30, cfg=None, dtype_bytes=2)
    monkeypatch.setattr(MemoryBudget, "buckets", lambda self, buckets: buckets)
    runner, backend = modes.prepare_mode(lm, mode, CUDA, folder=None, report=lambda *a: None, budget=budget)
    return backend, runner, lm


def test_realtime_without_a_quantized_kernel_runs_high_fidelitys_path(gpu):
    monkeypatch, quantized = gpu
    backend, runner, lm = prepare(Mode.REALTIME, triton=False, monkeypatch=monkeypatch)
    assert not quantized
    assert backend == f"FP16 CUDA graphs; {modes.NO_QUANTIZED_KERNEL} (Stand-in GPU, sm_120)"
    assert not runner.fused and not lm.fused


def test_realtime_quantizes_where_triton_runs_w4a4(gpu):
    monkeypatch, quantized = gpu
    backend, runner, lm = prepare(Mode.REALTIME, triton=True, monkeypatch=monkeypatch)
    assert quantized and backend == "W4A4 x (Stand-in GPU, sm_120)"
    assert runner.fused and lm.fused


def test_realtime_quantizes_without_triton_where_the_cuda_int4_gemm_runs(gpu):
    """RTX 30/40 on Windows: NVRTC builds the INT4 GEMM, the activations are quantized by plain PyTorch ops."""
    monkeypatch, quantized = gpu
    monkeypatch.setattr(w4a4_cuda, "is_supported", lambda device: True)
    prepare(Mode.REALTIME, triton=False, monkeypatch=monkeypatch)
    assert quantized


def test_high_fidelity_says_when_its_kernels_are_not_fused(gpu):
    monkeypatch, quantized = gpu
    unfused, fused = (prepare(Mode.HIFI, triton=t, monkeypatch=monkeypatch)[0] for t in (False, True))
    assert unfused == "FP16 CUDA graphs (Stand-in GPU, sm_120)"
    assert fused == "FP16 fused + CUDA graphs (Stand-in GPU, sm_120)"
    assert not quantized


def test_cublaslt_workspace_is_none_unless_the_user_chose_one(monkeypatch):
    monkeypatch.delenv(modes.CUBLASLT_WORKSPACE_ENV, raising=False)
    modes.settle_cublaslt_workspace()
    assert modes.CUBLASLT_WORKSPACE_ENV == "CUBLASLT_WORKSPACE_SIZE"  # the name PyTorch reads
    assert os.environ["CUBLASLT_WORKSPACE_SIZE"] == "0"
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "4096")
    modes.settle_cublaslt_workspace()
    assert os.environ["CUBLASLT_WORKSPACE_SIZE"] == "4096"  # the user's choice stands


def test_engine_load_settles_the_workspace_on_a_gpu_only(monkeypatch):
    from engine import engine as engine_module

    calls = []
    monkeypatch.setattr(engine_module, "settle_cublaslt_workspace", lambda: calls.append("settled"))
    monkeypatch.setattr(engine_module, "resolve_checkpoint", lambda *a: (_ for _ in ()).throw(RuntimeError("stop")))
    for device, expected in (("cpu", []), ("cuda", ["settled"])):
        calls.clear()
        monkeypatch.setattr(engine_module, "pick_device", lambda d: torch.device(d))
        with pytest.raises(RuntimeError, match="stop"):
            engine_module.Engine.load("unused", device=device)
        assert calls == expected
