"""tools/kernels/fa3_probe without a GPU: the build module's errors when FA3's source is missing, its nvcc
command and object reuse, the configurations, the wrapper's operand checks, the bench's shapes and fp8 layout.
The kernels themselves are checked on the H200 by the bench (against float64, graph against eager)."""
import re

import pytest
import torch

from tools.kernels.fa3_probe import bench, build
from tools.kernels.fa3_probe.configs import CONFIGS
from tools.kernels.fa3_probe.library import Fa3Probe, check_operands


def fake_fa3(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name in build.FA3_FILES:
        (folder / name).write_text("")
    return folder


def test_missing_source_says_how_to_give_it(monkeypatch):
    monkeypatch.delenv(build.SOURCE_ENV, raising=False)
    with pytest.raises(build.BuildError, match="--fa3"):
        build.find_source()


def test_a_folder_without_fa3_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(build.SOURCE_ENV, str(tmp_path))
    with pytest.raises(build.BuildError, match="flash_fwd_launch_template.h"):
        build.find_source()


def test_the_checkout_or_its_hopper_folder(tmp_path):
    hopper = fake_fa3(tmp_path / "hopper")
    assert build.find_source(str(tmp_path)) == hopper
    assert build.find_source(str(hopper)) == hopper


def test_the_build_command_fails_clearly_without_source(tmp_path, capsys):
    assert build.main(["--fa3", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "no FA3 hopper/ sources" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_compile_command_names_the_configuration():
    config = CONFIGS[0]
    command = build.compile_command(build.Path("nvcc"), fa3=build.Path("/fa3/hopper"), headers=build.Path("/cutlass"),
                                    source=build.HERE / "kernel.cu", obj=build.Path("a.o"), defines=config.defines())
    assert "arch=compute_90a,code=sm_90a" in command and not any(a.startswith("-arch") for a in command)
    assert f"-DVD_NAME={config.name}" in command
    assert "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED" in command and "--use_fast_math" in command
    assert "-I/fa3/hopper" in command and "-I/cutlass/include" in command and "-I/cutlass/tools/util/include" in command
    assert command[-3:] == [str(build.HERE / "kernel.cu"), "-o", "a.o"]


def test_an_object_is_rebuilt_only_when_its_command_or_source_changed(tmp_path):
    source, obj, runs = tmp_path / "k.cu", tmp_path / "k.o", tmp_path / "runs"
    source.write_text("")
    build.os.utime(source, (1e9, 1e9))  # long before the objects: an mtime tie would rebuild

    def compile_with(flag):
        build._compile((["sh", "-c", f"echo {flag} >> {runs}; touch {obj}"], source, obj))
        return runs.read_text().split()

    assert compile_with("a") == ["a"]
    assert compile_with("a") == ["a"]  # same command, source unchanged: reused
    assert compile_with("b") == ["a", "b"]  # another command
    obj_time = obj.stat().st_mtime
    build.os.utime(source, (obj_time + 10, obj_time + 10))
    assert compile_with("b") == ["a", "b", "b"]  # the source changed since


def test_configurations_are_distinct_and_include_fa3s_own_choice():
    names = [c.name for c in CONFIGS]
    assert len(set(names)) == len(names) and len({(c.e4m3, c.pack_gqa) for c in CONFIGS}) == len(CONFIGS)
    assert all(re.fullmatch(r"[a-z0-9_]+", name) for name in names)
    assert any(not c.e4m3 and c.pack_gqa for c in CONFIGS)  # FA3's heuristic packs GQA for every varlen call
    assert CONFIGS[0].defines() == [f"-DVD_NAME={CONFIGS[0].name}", f"-DVD_E4M3={int(CONFIGS[0].e4m3)}",
                                    f"-DVD_PACKGQA={int(CONFIGS[0].pack_gqa)}"]


def t(rows, heads, d=128, dtype=torch.float16):
    return torch.zeros(rows, heads, d, dtype=dtype)


CU = torch.tensor([0, 3, 5], dtype=torch.int32)


@pytest.mark.parametrize(("q", "k", "v", "cu", "e4m3", "message"), [
    (t(5, 4, 64), t(5, 2, 64), t(5, 2, 64), CU, False, r"q must be \[rows, heads, 128\]"),
    (t(5, 4), t(4, 2), t(5, 2), CU, False, r"k must be \[5, Hkv, 128\]"),
    (t(5, 4), t(5, 2), t(5, 1), CU, False, r"v must be \[5, Hkv, 128\]"),
    (t(5, 4), t(5, 3), t(5, 3), CU, False, r"q's heads \(4\) must be a multiple of k's \(3\)"),
    (t(5, 4, dtype=torch.float32), t(5, 2), t(5, 2), CU, False, "q must be torch.float16"),
    (t(5, 4), t(5, 2), t(5, 2), CU, True, "q must be torch.float8_e4m3fn"),
    (t(5, 4), t(5, 2), t(5, 2, 256)[..., ::2], CU, False, r"v must be .* strides \(512, 256, 2\)"),
    (t(5, 4), t(5, 2), t(5, 2), CU.long(), False, "cu_seqlens must be a contiguous int32"),
    (t(5, 4), t(5, 2), t(5, 2), CU[:1], False, "cu_seqlens must be a contiguous int32"),
    (t(5, 4), t(5, 2), t(5, 2), CU, False, "q must be on q's CUDA device, got cpu"),  # everything on the CPU
])
def test_operand_checks(q, k, v, cu, e4m3, message):
    with pytest.raises(ValueError, match=message):
        check_operands(q, k, v, cu, e4m3=e4m3)


@pytest.mark.parametrize("path", ["", "absent.so"])
def test_a_missing_library_is_said(path):
    with pytest.raises(FileNotFoundError, match="fa3_probe.build"):
        Fa3Probe(path)


def test_shapes_parse_as_bench_attention_writes_them():
    assert bench.parse_shape("560x290") == (560, 290, 1)
    assert bench.parse_shape("560x290x8") == (560, 290, 8)
    for bad in ("560", "560x", "560x290x8x2", "0x5", "ax5"):
        with pytest.raises(bench.argparse.ArgumentTypeError):
            bench.parse_shape(bad)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float16])
def test_views_keep_the_qkv_layout(dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, h, 128, generator=g).half() for h in (16, 8, 8))
    q8, k8, v8 = bench.qkv_views(q, k, v, dtype)
    assert all(x.dtype == dtype and x.stride()[:2] == (bench.QKV_WIDTH, 128) for x in (q8, k8, v8))
    size = dtype.itemsize
    assert v8.data_ptr() - q8.data_ptr() == (16 + 8) * 128 * size and k8.data_ptr() - q8.data_ptr() == 16 * 128 * size
    for x8, x in ((q8, q), (k8, k), (v8, v)):
        assert torch.equal(x8.float(), x.to(dtype).float())
