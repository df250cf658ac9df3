"""tools/kernels/bench_int8_down.py without a GPU: its arguments, its refusal to run without CUDA, and its checks
on the CPU (Triton's interpreter, a small MLP), which pass on the real chains and fail on a planted wrong one."""
import pytest
import torch

from tools.kernels import bench_int8_down as bench

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_arguments():
    assert bench.parse_args([]).rows == list(bench.ROWS) and bench.parse_args([]).json is None
    args = bench.parse_args(["--rows", "128", "512", "--json", "/tmp/x.json"])
    assert args.rows == [128, 512] and args.json == "/tmp/x.json"
    with pytest.raises(SystemExit):
        bench.parse_args(["--rows", "0"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_refuses_to_run_without_a_gpu(capsys):
    assert bench.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def small_case():
    layer = bench.make_layers(DEVICE, 1, inter=96, hidden=32)[0]
    return bench.make_gate_up(17, DEVICE, inter=96), layer


def test_checks_pass_on_the_real_chains_and_fail_on_a_wrong_one():
    gate_up, layer = small_case()
    tiles = bench.gemm_tiles(torch.device(DEVICE))
    results = bench.check(gate_up, layer, tiles)
    assert len(results) == 5 + len(tiles) + len(bench.SWIGLU_WARPS) and not bench.failures(results)
    layer.fast.wscales.mul_(1 + 2.0 ** -10)  # a planted error of the Triton path's weights: 1/1024 off
    assert set(bench.failures(bench.check(gate_up, layer, tiles))) == {
        "int8 separate (W8A8Linear triton) == reference", "int8 fused (Int8Rows handed over) == reference",
        *(f"int8 gemm {name} == reference" for name in tiles)}
