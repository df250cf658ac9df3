"""Prompt layout: our ids and audio mask equal upstream's `_prepare_inference_inputs`, token for token."""
import pytest
import torch
from golden_calls import greedy_calls

from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_text_tokenizer, read_model_config
from engine.lm.decode import build_cfg_batch
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


def test_prompt_holds_long_ids_and_a_bool_mask_of_its_own(tokenizer):
    """What pack and the eager batch read: [C, L] int64 ids and an [L] bool mask, contiguous, owning their memory
    (a caller's reference tokens of any integer dtype are copied in, not viewed)."""
    cfg = read_model_config(DEMO_MODEL)
    ref = torch.randint(0, 1024, (cfg.num_codebooks, 5), dtype=torch.int16)
    prompt = build_prompt(tokenizer, cfg, "Hi.", 4, ref_text="Yes.", ref_tokens=ref, denoise=True)
    assert prompt.ids.dtype == torch.long and prompt.audio_mask.dtype == torch.bool
    assert prompt.ids.is_contiguous() and prompt.audio_mask.is_contiguous()
    assert prompt.ids[:, -9:-4].tolist() == ref.tolist()
    ref[0, 0] += 1
    assert prompt.ids[0, -9] == ref[0, 0] - 1


def test_denoise_token_only_with_a_reference(tokenizer):
    cfg = read_model_config(DEMO_MODEL)
    denoise_id = tokenizer.convert_tokens_to_ids("<|denoise|>")
    ref = torch.zeros(cfg.num_codebooks, 5, dtype=torch.long)
    with_ref = build_prompt(tokenizer, cfg, "Hi.", 4, ref_text="Yes.", ref_tokens=ref, denoise=True)
    without_ref = build_prompt(tokenizer, cfg, "Hi.", 4, denoise=True)
    assert with_ref.ids[0, 0] == denoise_id and denoise_id not in without_ref.ids[0].tolist()
    assert with_ref.audio_mask.sum() == 5 + 4 and without_ref.audio_mask.sum() == 4


def test_a_generated_reference_stays_where_it_is_until_the_ids_reach_the_device(tokenizer):
    """A later chunk's reference (chunk 0's tokens, on the device) is MASK in the host-side ids and written in where
    the ids reach the device (the eager loop's CFG batch here; the running batch's layouts: test_continuous): the
    model's input is the one the same tokens give as a clip's reference."""
    cfg = read_model_config(DEMO_MODEL)
    ref = torch.randint(0, 1024, (cfg.num_codebooks, 5), generator=torch.Generator().manual_seed(2))
    on_host = build_prompt(tokenizer, cfg, "Hi.", 4, ref_text="Yes.", ref_tokens=ref, denoise=True)
    kept = build_prompt(tokenizer, cfg, "Hi.", 4, ref_text="Yes.", generated_ref=ref, denoise=True)
    assert kept.device_ref is ref and torch.equal(kept.audio_mask, on_host.audio_mask)
    assert (kept.ids[:, -9:] == cfg.audio_mask_id).all() and torch.equal(kept.ids[:, :-9], on_host.ids[:, :-9])
    ids = kept.ids.clone()
    kept.write_device_ref(ids)
    assert torch.equal(ids, on_host.ids)
    assert torch.equal(build_cfg_batch([kept], cfg.audio_mask_id, "cpu").input_ids,
                       build_cfg_batch([on_host], cfg.audio_mask_id, "cpu").input_ids)
    with pytest.raises(ValueError):
        build_prompt(tokenizer, cfg, "Hi.", 4, ref_text="Yes.", ref_tokens=ref, generated_ref=ref)
