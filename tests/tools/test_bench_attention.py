"""tools/kernels/bench_attention.py: `--before PATH[:key=value,...]` calls each copy of the kernel module with the
settings written after its colon (ints and booleans), none without a colon; the operands have the model's layout."""
import pytest
import torch

from kernels._triton import HAS_TRITON
from tools.kernels.bench_attention import HEAD_DIM, N_KV_HEADS, N_Q_HEADS, load_kernel, operands


def test_before_spec_passes_its_settings(tmp_path):
    path = tmp_path / "variant.py"
    path.write_text("def ragged_attention(*args, **settings):\n    return args, settings\n")
    name, call = load_kernel(f"{path}:block_n=128,group_heads=False,hopper=True")
    assert name == f"{path}:block_n=128,group_heads=False,hopper=True"
    assert call(1, 2) == ((1, 2), {"block_n": 128, "group_heads": False, "hopper": True})
    assert load_kernel(str(path))[1](3) == ((3,), {})


@pytest.mark.skipif(not HAS_TRITON, reason="the operands come from the fused qk_norm_rope (Triton)")
def test_operands_are_laid_out_as_the_fused_model_has_them():
    """v a view of the qkv projection's output (read with its row stride, as the model's attention reads it),
    q and k in buffers of their own."""
    # on a GPU its compiled kernel; without one, Triton's interpreter (tests/conftest.py), which takes CPU tensors
    q, k, v = operands(3, device="cuda" if torch.cuda.is_available() else "cpu")
    width = (N_Q_HEADS + 2 * N_KV_HEADS) * HEAD_DIM
    assert v.stride() == (width, HEAD_DIM, 1) and v.storage_offset() == (N_Q_HEADS + N_KV_HEADS) * HEAD_DIM
    assert q.is_contiguous() and k.is_contiguous()


def test_before_spec_path_may_hold_a_colon(tmp_path):
    """A Windows drive letter (here: a folder named with a colon) belongs to the path, not to the settings."""
    folder = tmp_path / "D:kernels"
    folder.mkdir()
    path = folder / "variant.py"
    path.write_text("def ragged_attention(*args, **settings):\n    return args, settings\n")
    assert load_kernel(str(path))[1](1) == ((1,), {})
    assert load_kernel(f"{path}:block_n=64")[1](2) == ((2,), {"block_n": 64})
    folder = tmp_path / "a:b=c"  # a colon-part with "=" that is still the path's: it holds a separator
    folder.mkdir()
    (folder / "variant.py").write_text(path.read_text())
    assert load_kernel(str(folder / "variant.py"))[1](3) == ((3,), {})
