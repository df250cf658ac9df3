"""tools/bench_decode_shapes.py runs end to end (here on the CPU, CUDA's clock and memory counters stood in for) and
times, compares and weighs every path of the decoder's convolutions: each one reaches the convolutions; the codec
is loaded and warmed up as the engine's."""
import json

import pytest
import torch

pytest.importorskip("triton")  # tools.kernels.bench_decode, which the bench imports, times with Triton

import engine.codec
import tools.bench_decode_shapes as bench
from engine.codec import AudioCodec
from engine.constants import DEMO_MODEL
from engine.conv import ConvPath, convolve


@pytest.fixture
def paths_asked(monkeypatch):
    """The paths the decoder's convolutions were asked to take, on a CPU with CUDA's calls stood in for."""
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    for name, value in {"synchronize": None, "reset_peak_memory_stats": None, "memory_allocated": 0,
                        "max_memory_allocated": 3 * 2**20, "mem_get_info": (1, 2), "get_device_name": "cpu"}.items():
        monkeypatch.setattr(torch.cuda, name, lambda *a, value=value: value)
    asked = set()

    def spy(conv, x, *, bias, path):
        asked.add(path)
        return convolve(conv, x, bias=bias, path=path)

    monkeypatch.setattr(engine.codec, "convolve", spy)
    return asked


def test_every_part_measures_every_path(monkeypatch, capsys, paths_asked):
    warmed = []
    monkeypatch.setattr(AudioCodec, "warm_up", lambda codec: warmed.append(codec))
    assert bench.main(["--model", str(DEMO_MODEL), "--short", "3", "--long", "", "--batched", "2x3",
                       "--memory", "1x4,2x2", "--runs", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["part"] for line in lines] == ["device", "shape", "shape", "threads", "memory", "memory"]
    shapes, memory = lines[1:3], lines[4:]
    assert [(line["batch"], line["frames"]) for line in shapes] == [(1, 3), (2, 3)]
    assert [(line["batch"], line["frames"]) for line in memory] == [(1, 4), (2, 2)]
    for path in ("native", "cudnn", "cudnn_fp32"):
        for line in shapes:
            assert line[f"{path}_first_ms"] > 0 and line[f"{path}_warm_ms"] > 0
        for line in memory:
            assert line[f"{path}_first_peak_mib"] == line[f"{path}_again_peak_mib"] == 3
    for line in shapes:  # on a CPU every path is the module's own call
        assert line["cudnn_max_abs_diff"] == line["cudnn_fp32_max_abs_diff"] == 0
    assert paths_asked == set(ConvPath)
    assert len(warmed) == 1  # as Engine.load warms its codec: no timed decode compiles a Snake variant
