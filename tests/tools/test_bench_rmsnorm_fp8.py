"""tools/kernels/bench_rmsnorm_fp8.py without a GPU: its arguments, another kernels/ folder imported beside
this tree's without replacing it, and its checks in Triton's interpreter: a faithful copy passes, a copy
whose quantizer is wrong fails."""
import shutil
import sys
from pathlib import Path

import pytest
import torch

from kernels._triton import HAS_TRITON
from tools.kernels import bench_rmsnorm_fp8 as bench

KERNELS = Path(__file__).parents[2] / "kernels"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # Triton's interpreter runs CPU tensors only


def copy_kernels(root: Path, plant: tuple[str, str, str] | None = None) -> Path:
    """A copy of this tree's kernels/ under root; `plant` (file, old, new) replaces one line in the copy."""
    shutil.copytree(KERNELS, root / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    if plant is not None:
        path = root / "kernels" / plant[0]
        source = path.read_text()
        assert source.count(plant[1]) == 1
        path.write_text(source.replace(plant[1], plant[2]))
    return root


def test_arguments(tmp_path):
    args = bench.parse_args([])
    assert args.before is None and args.rows == [320, 896] and args.hidden == 1024
    assert bench.parse_args(["--before", str(copy_kernels(tmp_path)), "--rows", "17"]).rows == [17]
    with pytest.raises(SystemExit):
        bench.parse_args(["--before", str(tmp_path / "nowhere")])


def test_another_kernels_folder_imports_beside_this_one(tmp_path):
    ours = sys.modules.get("kernels.rmsnorm")
    other = bench.import_kernels(copy_kernels(tmp_path))
    assert Path(other.rmsnorm.__file__).is_relative_to(tmp_path)
    assert Path(other.fp8_ref.__file__).is_relative_to(tmp_path)
    assert Path(sys.modules["kernels"].__file__).parent == KERNELS
    assert sys.modules.get("kernels.rmsnorm") is ours
    assert bench.takes_reciprocals(other)


@pytest.mark.skipif(not HAS_TRITON, reason="Triton is not installed")
def test_checks_pass_a_faithful_copy_and_fail_a_wrong_quantizer(tmp_path, capsys):
    after = bench.import_kernels(None)
    same = bench.import_kernels(copy_kernels(tmp_path / "same"))
    assert bench.check({"after": after, "before": same}, rows=3, hidden=64, device=DEVICE) == []
    assert "0.00e+00 of the codes moved" in capsys.readouterr().out
    wrong = bench.import_kernels(copy_kernels(tmp_path / "wrong", plant=(
        "row_quant.py", "return x * tl.load(inv_smooth_ptr + cols", "return x + tl.load(inv_smooth_ptr + cols")))
    failures = bench.check({"after": after, "before": wrong}, rows=3, hidden=64, device=DEVICE)
    assert "before rmsnorm_fp8: codes or scales differ from its reference" in failures
    assert any("codes moved" in failure for failure in failures)
