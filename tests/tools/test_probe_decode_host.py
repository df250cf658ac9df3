"""tools/probe_decode_host.py: it says it needs a GPU on a CPU; on a GPU, a run on the demo codec gives every figure,
the eight threads' readiness sorted, and the graph's waves equal to the eager ones."""
import json

import pytest
import torch

from engine.constants import DEMO_MODEL
from tools import probe_decode_host


def test_says_it_needs_a_gpu(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert probe_decode_host.main(["--model", str(DEMO_MODEL), "--json", str(tmp_path / "out.json")]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and not (tmp_path / "out.json").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_run_on_the_demo_codec(tmp_path):
    out = tmp_path / "out.json"
    assert probe_decode_host.main(["--model", str(DEMO_MODEL), "--frames", "8", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["8"]
    assert result["one"]["host_ms"] > 0 and len(result["in_a_row"]["ready_ms"]) == probe_decode_host.TEAM
    assert all(ready == sorted(ready) and len(ready) == probe_decode_host.TEAM for ready in result["threads"])
    assert result["graph"]["max_abs_diff"] == 0.0 and result["profile"]["kernels"] > 0
