"""tools/kernels/bench_attention.py's `--before PATH[:key=value,...]`: each copy of the kernel module is
called with the settings written after its colon (ints and booleans), none without a colon."""
from tools.kernels.bench_attention import load_kernel


def test_before_spec_passes_its_settings(tmp_path):
    path = tmp_path / "variant.py"
    path.write_text("def ragged_attention(*args, **settings):\n    return args, settings\n")
    name, call = load_kernel(f"{path}:block_n=128,group_heads=False,hopper=True")
    assert name == f"{path}:block_n=128,group_heads=False,hopper=True"
    assert call(1, 2) == ((1, 2), {"block_n": 128, "group_heads": False, "hopper": True})
    assert load_kernel(str(path))[1](3) == ((3,), {})
