"""kernels/_cuda_libs.py's library search as NVRTC uses it (kernels/w4a4_cuda.nvrtc_candidates), on a Windows
layout made in a temporary folder (the search reads only sys.platform, sys.path and torch's folder)."""
import os
import sys
from pathlib import Path

import torch

from kernels import _cuda_libs, w4a4_cuda

NVRTC_FILES = ("nvrtc64_130_0.dll", "nvrtc64_130_0.alt.dll", "nvrtc-builtins64_130.dll")


def test_nvrtc_search_skips_the_alt_build_in_torch_and_in_pip_packages(tmp_path, monkeypatch):
    """PyTorch's Windows wheel (torch/lib) and pip's nvidia-cuda-nvrtc (bin/) hold nvrtc64_*.alt.dll beside
    nvrtc64_*.dll, both matching NVRTC's glob: NVRTC's search lists the plain build of each, torch's first; a
    search without `skip` lists both builds of each."""
    torch_lib, pip_bin = tmp_path / "torch" / "lib", tmp_path / "nvidia" / "cuda_nvrtc" / "bin"
    for folder in (torch_lib, pip_bin):
        folder.mkdir(parents=True)
        for name in NVRTC_FILES:
            (folder / name).touch()
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(torch, "__file__", str(tmp_path / "torch" / "__init__.py"))
    monkeypatch.delenv(w4a4_cuda.NVRTC_ENV, raising=False)

    assert w4a4_cuda.nvrtc_candidates() == [str(torch_lib / "nvrtc64_130_0.dll"), str(pip_bin / "nvrtc64_130_0.dll")]
    everything = _cuda_libs.library_candidates(env_var=w4a4_cuda.NVRTC_ENV, linux_name="libnvrtc",
                                               windows_pattern="nvrtc64_*.dll")
    assert sorted(os.path.relpath(p, tmp_path) for p in everything) == sorted(
        str(Path(folder.relative_to(tmp_path), name)) for folder in (torch_lib, pip_bin) for name in NVRTC_FILES[:2])
