"""tools/profile_takes.py's FLOP count of a step equals what the model's own linears hold (2 FLOP per weight and
row), so the GEMM rate it reports against the GPU's peak is the model's."""
import torch

from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm
from tools.profile_takes import gemm_flop


def test_the_flop_of_a_step_are_the_model_linears_weights_times_rows():
    lm = load_lm(DEMO_MODEL, torch.device("cpu"), torch.float32)
    layer_weights = sum(m.weight.numel() for m in lm.layers.modules() if isinstance(m, torch.nn.Linear))
    heads = lm.audio_heads.weight.numel()
    rows, target_rows = 896, 430
    assert gemm_flop(lm.cfg, rows, target_rows) == 2 * (rows * layer_weights + target_rows * heads)
