"""tools/w4a4_recipe_scan on the demo model (CPU, fast): the per-layer drift is attributed to the layer that
causes it, and a recipe that changes nothing measures as no drift."""
import copy

import torch

from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm
from engine.quant import QuantConfig
from tools.w4a4_recipe_scan import forward_with_layers, relative_error, render, scan, workload_batch


def demo_batch(seed: int = 1):
    lm = load_lm(DEMO_MODEL, "cpu", torch.float32)
    return lm, workload_batch(DEMO_MODEL, lm, "en-ref3-out3", seed)


def test_the_seed_draws_the_reference_tokens_and_nothing_else():
    lm, one = demo_batch(seed=1)
    _, again = demo_batch(seed=1)
    _, other = demo_batch(seed=2)
    assert torch.equal(one.input_ids, again.input_ids)
    differs = (one.input_ids != other.input_ids).any(dim=(0, 1))  # [S]: positions where the tokens differ
    assert differs.any() and torch.equal(one.audio_mask, other.audio_mask)
    assert one.audio_mask[0, differs].all()  # only reference audio tokens change, never the text


def test_drift_shows_from_the_perturbed_layer_on():
    lm, batch = demo_batch()
    ref_logits, ref_states = forward_with_layers(lm, batch)
    perturbed = copy.deepcopy(lm)
    with torch.no_grad():
        perturbed.layers[1].mlp.down_proj.weight.mul_(1.5)
    logits, states = forward_with_layers(perturbed, batch)
    errors = [relative_error(s, r) for s, r in zip(states, ref_states, strict=True)]
    assert len(errors) == lm.cfg.num_layers
    assert errors[0] == 0.0  # same weights, same inputs: bit-identical
    assert all(e > 1e-3 for e in errors[1:])
    assert logits.shape[:2] == (2, lm.cfg.num_codebooks)  # [cond/uncond, C, T, V]


def test_a_recipe_that_converts_nothing_has_no_drift():
    lm, batch = demo_batch()
    recipes = {"all-fp16": QuantConfig(keep_fp16=("*",))}
    [result] = scan(lm, batch, recipes, progress=lambda message: None)
    assert result.agreement == 1.0 and abs(result.one_minus_cos) < 1e-12
    assert result.layer_errors == [0.0] * lm.cfg.num_layers
    table = render([result], recipes)
    assert table.count("\n| 1 | ") == 1 and "100.0 %" in table
