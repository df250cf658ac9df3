"""tools/kernels/fp8_product_wait.py without a GPU: its arguments and its refusal to run without CUDA."""
import pytest
import torch

from tools.kernels import fp8_product_wait as probe


def test_arguments():
    assert (probe.parse_args([]).rows, probe.parse_args([]).rounds) == (896, 3)
    assert probe.parse_args(["--rows", "320", "--rounds", "1"]).rows == 320
    for bad in (["--rows", "0"], ["--rounds", "0"]):
        with pytest.raises(SystemExit):
            probe.parse_args(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_refuses_to_run_without_a_gpu(capsys):
    assert probe.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
