"""Prompt layout: our ids and audio mask equal upstream's `_prepare_inference_inputs`, token for token."""
import pytest
import torch
from golden_calls import greedy_calls

from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_text_tokenizer, read_model_config
from engine.lm.prompt import build_prompt

CALLS = greedy_calls()


@pytest.fixture(scope="module")
def tokenizer():
    return load_text_tokenizer(DEMO_MODEL)


@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_prompt_matches_upstream(tokenizer, call):
    f = call.facts
    prompt = build_prompt(tokenizer, read_model_config(DEMO_MODEL), f["text"], f["target_len"], ref_text=f["ref_text"],
                          ref_tokens=call.ref_tokens, language=f["lang"], instruct=f["instruct"],
                          denoise=call.config.denoise)
    assert prompt.ids.tolist() == call.tensors["cond_input_ids"].tolist()
    assert torch.equal(prompt.audio_mask, call.tensors["cond_audio_mask"])
    assert prompt.target_len == f["target_len"]


def test_denoise_token_only_with_a_reference(tokenizer):
    cfg = read_model_config(DEMO_MODEL)
    denoise_id = tokenizer.convert_tokens_to_ids("<|denoise|>")
    ref = torch.zeros(cfg.num_codebooks, 5, dtype=torch.long)
    with_ref = build_prompt(tokenizer, cfg, "Hi.", 4, ref_text="Yes.", ref_tokens=ref, denoise=True)
    without_ref = build_prompt(tokenizer, cfg, "Hi.", 4, denoise=True)
    assert with_ref.ids[0, 0] == denoise_id and denoise_id not in without_ref.ids[0].tolist()
    assert with_ref.audio_mask.sum() == 5 + 4 and without_ref.audio_mask.sum() == 4
