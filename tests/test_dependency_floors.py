"""pyproject's torch floor admits no PyTorch without an API the product calls: pip keeps the torch a user already
has when it meets the floor, so a floor too low is a crash on their machine, never on ours (2.13 here)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# API -> (first PyTorch with it, the file that calls it)
TORCH_APIS = {"scaled_dot_product_attention(..., enable_gqa=True)": ((2, 5), "engine/lm/fused_ops.py")}


def test_the_torch_floor_has_every_api_the_product_calls():
    floor = re.search(r'"torch>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    for api, (version, path) in TORCH_APIS.items():
        assert api.split("(..., ")[-1].split("=")[0] in (ROOT / path).read_text(), f"{path} no longer calls {api}"
        assert tuple(map(int, floor.split("."))) >= version, f"torch>={floor} admits a PyTorch without {api}"
