"""tools/kernels/cutlass_gemm without a GPU: the build module's errors when CUTLASS's headers or nvcc are missing,
its nvcc command, the configurations' names, the wrapper's operand checks, the bench's interleaving and variants.
The GEMMs themselves are checked on the H200 by the bench (bitwise against cuBLAS, within fp16 rounding of float64)."""
import os
import re

import pytest
import torch

from tools.kernels.cutlass_gemm import bench, build
from tools.kernels.cutlass_gemm.configs import CONFIGS, INTERLEAVE
from tools.kernels.cutlass_gemm.library import CutlassGemm, check_operands, interleave_gate_up


def test_missing_headers_say_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.delenv(build.HEADERS_ENV, raising=False)
    with pytest.raises(build.BuildError, match="nvidia-cutlass==4.2.0.0") as error:
        build.find_headers(str(tmp_path))
    assert str(tmp_path) in str(error.value)


def test_headers_without_tools_util_are_refused(tmp_path):
    for header in ("include/cute/tensor.hpp", "include/cutlass/cutlass.h"):
        (tmp_path / header).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / header).write_text("")
    with pytest.raises(build.BuildError, match="tools/util/include"):
        build.find_headers(str(tmp_path))
    util = tmp_path / "tools/util/include/cutlass/util/packed_stride.hpp"
    util.parent.mkdir(parents=True)
    util.write_text("")
    assert build.find_headers(str(tmp_path)) == tmp_path


def test_headers_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(build.HEADERS_ENV, str(tmp_path / "absent"))
    with pytest.raises(build.BuildError, match="absent"):
        build.find_headers()


def test_missing_nvcc_is_said(tmp_path):
    with pytest.raises(build.BuildError, match="nvcc not found"):
        build.find_nvcc(str(tmp_path / "nvcc"))


def test_the_build_command_fails_clearly_without_headers(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(build.HEADERS_ENV, raising=False)
    assert build.main(["--cutlass", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "CUTLASS headers" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_compile_command_names_the_configuration():
    config = CONFIGS[0]
    command = build.compile_command(build.Path("nvcc"), build.Path("/cutlass"), config, build.Path("a.o"))
    assert "-arch=sm_90a" in command and f"-DVD_NAME={config.name}" in command
    assert command[command.index("-c") + 1].endswith("gemm.cu") and "-DVD_INTERLEAVE=8" not in command
    swiglu = next(c for c in CONFIGS if c.swiglu)
    command = build.compile_command(build.Path("nvcc"), build.Path("/cutlass"), swiglu, build.Path("a.o"))
    assert command[command.index("-c") + 1].endswith("gemm_swiglu.cu") and "-DVD_INTERLEAVE=8" in command
    assert f"-DVD_TM={config.tile[0]}" in command and f"-DVD_CN={config.cluster[1]}" in command
    assert "-I/cutlass/include" in command and "-I/cutlass/tools/util/include" in command
    assert build.link_command(build.Path("nvcc"), [build.Path("a.o")], build.Path("l.so"))[-3:] == ["a.o", "-o", "l.so"]


def test_configurations_are_distinct_and_legal():
    names = [c.name for c in CONFIGS]
    assert len(set(names)) == len(names)
    assert len({(c.tile, c.cluster, c.pingpong, c.stream_k, c.swap, c.swiglu) for c in CONFIGS}) == len(CONFIGS)
    for c in CONFIGS:
        assert re.fullmatch(r"[a-z0-9_]+", c.name)
        assert not (c.pingpong and c.stream_k)  # gemm.cu refuses it: stream-K is cooperative only
        assert not (c.swiglu and (c.stream_k or c.swap))  # gemm_swiglu.cu refuses them
        assert c.pingpong or c.tile[0] >= 128  # the cooperative schedule splits the tile's M over two warp groups


def f16(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


@pytest.mark.parametrize(("x", "weight", "out", "message"), [
    (f16(4, 64), f16(32, 48), None, r"x \[M, K\] and weight \[N, K\]"),
    (f16(4, 60), f16(32, 60), None, "multiples of 8"),
    (f16(4, 64), f16(36, 64), None, "multiples of 8"),
    (f16(4, 64), f16(32, 64), f16(4, 16), r"out must be \[4, 32\]"),
    (f16(4, 64).float(), f16(32, 64), None, "x must be contiguous fp16, got torch.float32"),
    (f16(4, 64), f16(64, 32).T, None, r"weight must be contiguous fp16, .* strides \(1, 32\)"),
    (f16(4, 64), f16(32, 64), None, "x must be on x's CUDA device, got cpu"),  # on the CPU
])
def test_operand_checks(x, weight, out, message):
    with pytest.raises(ValueError, match=message):
        check_operands(x, weight, out)


def test_interleaving_times_cublas_first_and_last_in_every_round():
    assert bench.interleaved_order(3, rounds=2) == [0, 1, 2, 0, 0, 1, 2, 0]


def test_split_k_variants_only_for_n_1024_at_small_m():
    names = [c.name for c in CONFIGS]
    plain = [c.name for c in CONFIGS if not c.swiglu]
    stream_k = [c.name for c in CONFIGS if c.stream_k]
    assert stream_k
    small = bench.variants_for(names, rows=320, n=1024)
    assert small[0].label == "cuBLAS" and small[0].config is None
    assert [v.config for v in small[1:len(plain) + 1]] == plain
    assert {(v.config, v.splits) for v in small if v.splits > 1} == {(n, s) for n in stream_k for s in bench.SPLITS}
    assert all(v.splits == 1 for v in bench.variants_for(names, rows=896, n=1024))
    assert all(v.splits == 1 for v in bench.variants_for(names, rows=256, n=4096))


@pytest.mark.parametrize("path", ["", "absent.so"])
def test_a_missing_library_is_said(path):
    with pytest.raises(FileNotFoundError, match="cutlass_gemm.build"):
        CutlassGemm(path)


def test_swiglu_variants_are_the_swiglu_configurations_after_the_pair():
    names = [c.name for c in CONFIGS]
    found = bench.swiglu_variants_for(names)
    assert found[0].config is None and found[0].label == "cuBLAS + swiglu"
    assert [v.config for v in found[1:]] == [c.name for c in CONFIGS if c.swiglu] != []
    swiglu = {c.name for c in CONFIGS if c.swiglu}
    assert not any(v.config in swiglu for v in bench.variants_for(names, rows=256, n=6144))


def test_interleaved_weight_pairs_each_gate_column_with_its_up_column():
    """The contract with gemm_swiglu.cu: in x @ interleave_gate_up(w).T, a column n with (n // 8) even is a gate
    value, n + 8 its up partner, both for output column (n // 16) * 8 + n % 8."""
    inter, k = 48, 16
    w = torch.randn(2 * inter, k, dtype=torch.float64)
    x = torch.randn(5, k, dtype=torch.float64)
    product, gate, up = x @ interleave_gate_up(w).T, x @ w[:inter].T, x @ w[inter:].T
    for n in range(2 * inter):
        if (n // INTERLEAVE) % 2 == 0:
            column = (n // (2 * INTERLEAVE)) * INTERLEAVE + n % INTERLEAVE
            assert torch.equal(product[:, n], gate[:, column])
            assert torch.equal(product[:, n + INTERLEAVE], up[:, column])


def test_interleaving_wants_whole_blocks():
    with pytest.raises(ValueError, match="multiple of 16"):
        interleave_gate_up(torch.zeros(40, 8))


@pytest.mark.parametrize("rows", [40, 33])
def test_swiglu_wants_a_weight_of_whole_blocks(rows):
    gemm = CutlassGemm.__new__(CutlassGemm)  # no library needed: the check comes first
    with pytest.raises(ValueError, match="multiple of 16"):
        gemm.swiglu("any", f16(4, 64), f16(rows, 64))


def test_an_object_is_kept_only_for_the_same_command_and_newer_than_the_sources(tmp_path):
    obj, command = tmp_path / "a.o", ["nvcc", "-DVD_TM=128"]
    obj.write_bytes(b"")
    assert not build.is_fresh(obj, command)  # no record of its command
    obj.with_suffix(".cmd").write_text("\n".join(command))
    assert build.is_fresh(obj, command)
    assert not build.is_fresh(obj, ["nvcc", "-DVD_TM=64"])
    os.utime(obj, (0, 0))  # older than gemm.cu
    assert not build.is_fresh(obj, command)


def test_the_bench_refuses_an_unknown_configuration(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--library", "absent.so", "--configs", "coop_128x128_c1x1", "no_such_tile"])
    assert "invalid choice: 'no_such_tile'" in capsys.readouterr().err
