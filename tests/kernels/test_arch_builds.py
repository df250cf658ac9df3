"""Every Triton kernel the engine launches compiles for sm_80/86/89/90/120 at the launch settings its wrapper picks,
fits that architecture's shared memory per block and spills no registers (tools/kernels/aot_archs.py; Triton's
compiler, no GPU). The H200 is the only GPU the benchmarks run on: this is what keeps a tile tuned there from
refusing to launch on an RTX card, whose blocks get 99 KB of shared memory where the H200's get 227 KB."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton.backends.nvidia.compiler", reason="Triton without its NVIDIA backend")


def _compiler_run(*args: str) -> subprocess.CompletedProcess:
    """A Python process without TRITON_INTERPRET (the compiler needs the kernels as Triton functions)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).parents[2], timeout=600, check=False)


@pytest.fixture(scope="module")
def fits() -> list[dict]:
    run = _compiler_run("-m", "tools.kernels.aot_archs", "--json")
    assert run.stdout, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_every_build_fits_every_arch(fits):
    misfits = [f for f in fits if not f["ok"]]
    assert not misfits, "\n".join(f"sm_{f['arch']} {f['name']}: {f['shared']} of {f['limit']} B shared, "
                                  f"{f['spilled']} B spilled" for f in misfits)


def test_each_arch_builds_the_kernels_its_modes_reach(fits):
    names = {arch: {f["name"] for f in fits if f["arch"] == arch} for arch in (80, 86, 89, 90, 120)}
    hifi = {"embed", "rmsnorm", "add_rmsnorm", "qk_norm_rope", "swiglu", "cfg_score", "noisy_scores", "reveal",
            "ragged attention fp16"}
    fp8 = {"fp8 quantize K=1024", "rmsnorm_fp8", "add_rmsnorm_fp8", "swiglu_scaled"}
    for arch, built in names.items():
        assert hifi <= built, arch
        assert ("w4a4 quantize packed" in built) == (arch in (80, 86, 89)), arch  # the CUDA INT4 GEMM's input
        assert fp8 <= built if arch >= 89 else not fp8 & built, arch
        layout = "e4m3" if arch >= 89 else "int8"  # FP8 tensor cores from sm_89 on
        assert {f"w4a4 gemm {layout} 128x128", f"w4a4 gemm {layout} 64x128"} <= built, arch
        assert {"int8 quantize K=3072", "swiglu_int8", "int8 gemm 128x128", "int8 gemm 32x64"} <= built, arch


def test_a_tile_past_an_rtx_cards_shared_memory_is_refused():
    """The check itself: the attention with one more pipeline stage (122,880 B at its 64-key blocks) fits an H200
    and not an RTX card."""
    code = ("import dataclasses; from tools.kernels.aot import attention_builds;"
            "from tools.kernels.aot_archs import fit; b = attention_builds()[0];"
            "deeper = dataclasses.replace(b, num_stages=b.num_stages + 1);"
            "print(fit(86, deeper).ok, fit(120, deeper).ok, fit(90, deeper).ok)")
    run = _compiler_run("-c", code)
    assert run.stdout.split() == ["False", "False", "True"], run.stderr[-3000:]
