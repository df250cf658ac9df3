"""The LM against upstream's recorded step-0 logits (fp32 CPU), and its own invariants."""
import pytest
import torch
from golden_calls import greedy_calls

from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm
from engine.lm.decode import build_cfg_batch

CALLS = greedy_calls()
LOGIT_CALLS = [c for c in CALLS if "step0_logits" in c.tensors]  # later chunks keep no logits
SHORTEST = min(CALLS, key=lambda c: c.facts["cond_len"])


@pytest.fixture(scope="module")
def lm():
    return load_lm(DEMO_MODEL)


def _target_logits(lm, prompts):
    """Logits [rows, C, V] of the target rows of upstream's CFG batch for `prompts`."""
    batch = build_cfg_batch(prompts, lm.cfg.audio_mask_id, next(lm.parameters()).device)
    with torch.inference_mode():
        return lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)


@pytest.mark.parametrize("call", LOGIT_CALLS, ids=[c.name for c in LOGIT_CALLS])
def test_step0_logits_match_upstream(lm, call):
    T = call.facts["target_len"]
    logits = _target_logits(lm, [call.prompt])  # [2T, C, V]: cond rows, then uncond rows
    positions = call.tensors["step0_positions"]
    ours = torch.stack([logits[:T][positions], logits[T:][positions]]).transpose(1, 2)  # [2, C, P, V]
    expected = call.tensors["step0_logits"]
    assert (ours - expected).abs().max() <= 1e-4 * expected.abs().max()


def test_selected_rows_equal_the_full_output(lm):
    prompt = SHORTEST.prompt
    batch = build_cfg_batch([prompt], lm.cfg.audio_mask_id, "cpu")
    with torch.inference_mode():
        full = lm(batch.input_ids, batch.audio_mask, batch.attn_mask)  # [2, S, C, V]
        picked = lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
    torch.testing.assert_close(picked, full.flatten(0, 1)[batch.rows], rtol=0, atol=1e-6)


def test_padding_in_a_batch_changes_nothing(lm):
    short, long = sorted((c.prompt for c in CALLS if c.name in ("auto_en", "clone_6s")), key=lambda p: p.ids.shape[1])
    assert short.ids.shape[1] < long.ids.shape[1]
    alone = [_target_logits(lm, [p]) for p in (short, long)]
    together = _target_logits(lm, [short, long])  # per item: cond rows, then uncond rows
    torch.testing.assert_close(together, torch.cat(alone), rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_runs_close_to_fp32(lm, dtype):
    prompt = SHORTEST.prompt
    reference = _target_logits(lm, [prompt]).flatten()
    half = _target_logits(load_lm(DEMO_MODEL, dtype=dtype), [prompt]).float().flatten()
    assert torch.isfinite(half).all()
    assert torch.nn.functional.cosine_similarity(half, reference, dim=0) > 0.999


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_matches_cpu(dtype):
    prompt = SHORTEST.prompt
    cpu = _target_logits(load_lm(DEMO_MODEL), [prompt]).flatten()
    gpu = _target_logits(load_lm(DEMO_MODEL, "cuda", dtype), [prompt]).float().cpu().flatten()
    assert torch.nn.functional.cosine_similarity(gpu, cpu, dim=0) > 0.999
