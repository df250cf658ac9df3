"""tools/repack_host_wait.py's arguments (its run needs an NVIDIA GPU: tests/gpu/run_gpu.sh step repackwait)."""
import pytest
import torch

from tools import repack_host_wait
from tools.repack_host_wait import parse


def test_defaults():
    args = parse(["--model", "/ckpt"])
    assert (args.model, args.queued, args.json) == ("/ckpt", 30, None)


def test_options():
    args = parse(["--model", "/ckpt", "--queued", "1", "--json", "/tmp/out.json"])
    assert (args.queued, args.json) == (1, "/tmp/out.json")


@pytest.mark.parametrize("argv", [[], ["--model", "/ckpt", "--queued", "0"], ["--model", "/ckpt", "--queued", "x"]])
def test_refused(argv):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2


def test_says_it_needs_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert repack_host_wait.main(["--model", "/ckpt"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
