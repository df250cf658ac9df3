"""tools/kernels/cublaslt.py's ctypes structs and enum values against CUDA 13's cublasLt.h, compiled with gcc.

The header comes from the nvidia-cublas wheel (pip's nvidia/cu13/include) or a CUDA toolkit; CUDA's runtime
headers (library_types.h, driver_types.h) from the toolkit. Skipped where either or gcc is missing, or where they
do not build for a missing header (on the H200 image it failed to build twice, 2026-12-04, gcc's message
not kept); any other failure fails.
"""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

import pytest

from tools.kernels import cublaslt

ENUMS = (cublaslt.DataType, cublaslt.Status, cublaslt.Misc, cublaslt.Desc, cublaslt.Cap, cublaslt.Config,
         cublaslt.Reduction)
STRUCTS = {"cublasLtMatmulAlgo_t": (cublaslt.Algo, ["data"]),
           "cublasLtMatmulHeuristicResult_t": (cublaslt.HeuristicResult,
                                               ["algo", "workspaceSize", "state", "wavesCount", "reserved"])}


def _include_dir(header: str, extra: list[str]) -> str | None:
    roots = [os.path.join(root, "nvidia", "**", "include") for root in sys.path] + extra
    for root in roots:
        for found in glob.glob(os.path.join(root, header), recursive=True):
            return os.path.dirname(found)
    return None


CUDA_HOMES = [os.environ.get("CUDA_HOME", "/usr/local/cuda"), *sorted(glob.glob("/usr/local/cuda-1*"), reverse=True)]
CUBLAS_INCLUDE = _include_dir("cublasLt.h", ["/work/cublas13/nvidia/cu13/include",
                                             *(os.path.join(h, "include") for h in CUDA_HOMES)])
RUNTIME_INCLUDE = _include_dir("library_types.h", [os.path.join(h, "targets", "*", "include") for h in CUDA_HOMES]
                               + [os.path.join(h, "include") for h in CUDA_HOMES])


def _program() -> str:
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <cublasLt.h>", "int main(void) {"]
    for enum in ENUMS:
        lines += [f'  printf("{name} %lld\\n", (long long){name});' for name in enum.__members__]  # aliases too
    for c_name, (_, fields) in STRUCTS.items():
        lines.append(f'  printf("sizeof {c_name} %zu\\n", sizeof({c_name}));')
        lines += [f'  printf("offsetof {c_name}.{f} %zu\\n", offsetof({c_name}, {f}));' for f in fields]
    return "\n".join([*lines, "  return 0;", "}"])


def _expected() -> dict[str, int]:
    want = {name: int(value) for enum in ENUMS for name, value in enum.__members__.items()}
    for c_name, (struct, fields) in STRUCTS.items():
        want[f"sizeof {c_name}"] = ctypes.sizeof(struct)
        want.update({f"offsetof {c_name}.{f}": getattr(struct, f).offset for f in fields})
    return want


@pytest.mark.skipif(CUBLAS_INCLUDE is None or RUNTIME_INCLUDE is None or shutil.which("gcc") is None,
                    reason="needs cublasLt.h (CUDA 13), CUDA's runtime headers and gcc")
def test_structs_and_enums_match_the_header(tmp_path):
    source = tmp_path / "abi.c"
    source.write_text(_program())
    binary = tmp_path / "abi"
    # cublasLt.h includes cuda_fp16.h and cuda_bf16.h, which need more of the toolkit (CCCL) than pip's
    # wheels ship; nothing the program prints uses their types, so empty ones stand in.
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for header in ("cuda_fp16.h", "cuda_bf16.h"):
        (stubs / header).write_text("")
    built = subprocess.run(["gcc", f"-I{stubs}", f"-I{CUBLAS_INCLUDE}", f"-I{RUNTIME_INCLUDE}", str(source), "-o",
                            str(binary)], capture_output=True, text=True)
    missing = [line for line in built.stderr.splitlines() if "fatal error" in line and "No such file" in line]
    if built.returncode and missing:  # an incomplete set of headers: nothing to compare
        pytest.skip(f"the CUDA headers here do not build: {missing[0].strip()}")
    assert built.returncode == 0, built.stderr
    printed = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.splitlines()
    got = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in printed}
    want = _expected()
    assert len(got) == len(want) > 40
    assert {k: v for k, v in got.items() if want[k] != v} == {}, "ctypes side differs from cublasLt.h"
