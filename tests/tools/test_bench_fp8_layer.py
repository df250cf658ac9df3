"""tools/kernels/bench_fp8_layer.py without a GPU: its refusal to run without CUDA, and its checks on the CPU (Triton's
interpreter, a small layer whose sizes are whole weight blocks), which pass on the real chains and fail on a planted
wrong one."""
import pytest
import torch

from tools.kernels import bench_fp8_layer as bench

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SMALL = bench.Sizes(hidden=128, inter=512, q_dim=512)  # K = 512: whole 128 x 512 weight blocks, as block scales need


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_refuses_to_run_without_a_gpu(capsys):
    assert bench.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_checks_pass_on_the_real_chains_and_fail_on_a_wrong_one():
    layers = [bench.layer_weights(seed, DEVICE, SMALL) for seed in range(2)]
    with torch.inference_mode():
        found, checks = bench.chains(17, layers)
        assert not bench.failures(checks), checks
        distances = [ok for ok in checks.values() if isinstance(ok, float)]
        assert len(distances) >= 5 and max(distances) < 0.05  # e4m3 on the activation, nothing more
        assert {"candidate swiglu blocks == torch", "candidate quantize blocks == torch"} <= checks.keys()
        for fn in found.values():  # every timed chain and kernel runs with another weight set too
            fn(1)
        layers[0]["o"].wscales.mul_(2)  # a planted error: o_proj's FP8 weight twice what its fp16 twin says
        _, checks = bench.chains(17, layers)
    assert set(bench.failures(checks)) == {
        f"attn-out chain, FP8 o_proj (quantize_act_fp8): distance to fp16's <= {bench.DISTANCE}",
        f"attn-out chain, FP8 o_proj, CANDIDATE static scale: distance to fp16's <= {bench.DISTANCE}"}
