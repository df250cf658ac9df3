"""tools/kernels/bench_scoring's equality checks, in Triton's interpreter at a small bucket: a baseline tree with the
same kernels passes, one whose reveal or cfg_score differs fails (the checks can tell)."""
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from tools.kernels import bench_scoring  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def baseline_with(tmp_path: Path, name: str, old: str, new: str):
    """kernels/<name>.py of this tree with `old` replaced by `new`, loaded as a baseline module."""
    (tmp_path / "kernels").mkdir()
    source = (ROOT / "kernels" / f"{name}.py").read_text()
    assert source.count(old) == 1
    (tmp_path / "kernels" / f"{name}.py").write_text(source.replace(old, new))
    return bench_scoring.load_baseline(tmp_path, name)


def test_reveal_check_tells_a_different_reveal(tmp_path):
    buf = bench_scoring.buffers([9, 5], 3, 48, seed=0)
    predicted = torch.randint(0, bench_scoring.MASK, buf.tokens.shape, device=bench_scoring.DEVICE)
    assert bench_scoring.same_reveals(bench_scoring.load_baseline(ROOT, "reveal"), buf, predicted)
    wrong = baseline_with(tmp_path, "reveal", "bins == digit + 1", "bins == digit")
    assert not bench_scoring.same_reveals(wrong, buf, predicted)


def test_score_check_tells_one_bit(tmp_path):
    assert bench_scoring.same_scores(bench_scoring.load_baseline(ROOT, "cfg_score"), H=3)
    wrong = baseline_with(tmp_path, "cfg_score", "score = best - ", "score = best * 1.0000001 - ")
    assert not bench_scoring.same_scores(wrong, H=3)
