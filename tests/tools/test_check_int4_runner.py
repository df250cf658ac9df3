"""tools/kernels/check_int4_runner.py's arguments (it runs on an NVIDIA GPU: tests/gpu/run_gpu.sh step int4graphs)."""
import pytest

from tools.kernels.check_int4_runner import parse


def test_a_model_and_an_optional_json_file():
    assert (parse(["--model", "/ckpt"]).model, parse(["--model", "/ckpt"]).json) == ("/ckpt", None)
    assert parse(["--model", "/ckpt", "--json", "/tmp/x.json"]).json == "/tmp/x.json"


def test_the_model_is_required(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse([])
    assert exit_.value.code == 2 and "--model" in capsys.readouterr().err
