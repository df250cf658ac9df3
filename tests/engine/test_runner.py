"""The static-shape runner (what CUDA graphs replay) against the reference unmasking loop.

On the CPU the runner runs its static algorithm eagerly (no graphs): packed cond+uncond rows,
additive block mask, head on the target rows only, rank-based top-k. With deterministic settings
it must give exactly the reference loop's tokens at fp32."""

import pytest
import torch

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import generate_tokens, unmask_schedule
from engine.lm.prompt import build_prompt
from engine.lm.runner import DEFAULT_BUCKETS, StaticRunner, pack


@pytest.fixture(scope="module")
def lm_and_tokenizer():
    return load_lm(DEMO_MODEL, "cpu", torch.float32), load_text_tokenizer(DEMO_MODEL)


def _prompt(lm, tok, with_ref: bool, target_len: int, text="Hello there, how are you today?"):
    ref = torch.randint(0, 1024, (8, 40), generator=torch.Generator().manual_seed(3)) if with_ref else None
    return build_prompt(tok, lm.cfg, text, target_len, ref_text="Some words here." if with_ref else None,
                        ref_tokens=ref, language="en", denoise=True)


@pytest.mark.parametrize("with_ref,target_len,cfg", [
    (True, 37, GenerationConfig(position_temperature=0.0)),
    (False, 20, GenerationConfig(position_temperature=0.0, num_step=8, guidance_scale=1.5)),
    (True, 60, GenerationConfig(position_temperature=0.0, guidance_scale=0.0, layer_penalty_factor=3.0)),
])
def test_static_runner_matches_reference_loop(lm_and_tokenizer, with_ref, target_len, cfg):
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, with_ref, target_len)
    expected = generate_tokens(lm, [prompt], cfg, torch.Generator().manual_seed(0))[0]
    runner = StaticRunner(lm, buckets=(128, 256))
    assert runner.eager  # no CUDA here: same algorithm, no graphs
    got = runner.generate(prompt, cfg)
    assert got.shape == expected.shape == (8, target_len)
    assert torch.equal(got, expected)
    assert (got != lm.cfg.audio_mask_id).all()


def test_runner_sampling_is_seeded_and_complete(lm_and_tokenizer):
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, True, 30)
    cfg = GenerationConfig(class_temperature=0.7)
    runner = StaticRunner(lm, buckets=(256,))
    a = runner.generate(prompt, cfg, torch.Generator().manual_seed(5))
    b = runner.generate(prompt, cfg, torch.Generator().manual_seed(5))
    c = runner.generate(prompt, cfg, torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert (a != lm.cfg.audio_mask_id).all()


def test_pack_layout(lm_and_tokenizer):
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, True, 10)
    c, T, S = prompt.ids.shape[1], 10, 128
    p = pack(prompt, S, 1024, unmask_schedule(T, 8, 32, 0.1), torch.float32)
    mask = p.attn[0, 0]
    assert (mask[:c, :c] == 0).all() and (mask[c:c + T, c:c + T] == 0).all()
    assert torch.isinf(mask[:c, c:c + T]).all() and torch.isinf(mask[c:c + T, :c]).all()
    pads = torch.arange(c + T, S)
    assert (mask[pads, pads] == 0).all() and torch.isinf(mask[pads][:, :c]).all()  # pads see only themselves
    assert torch.equal(p.positions[c:c + T], torch.arange(T))  # uncond rows restart at position 0
    assert torch.equal(p.ids[0, :, c:c + T], prompt.ids[:, -T:])
    assert int(p.schedule.sum()) == 8 * T
    with pytest.raises(ValueError):
        pack(prompt, c + T, 1024, [8 * T], torch.float32)  # no room for the junk row


def test_buckets_cover_long_prompts_with_little_padding():
    assert DEFAULT_BUCKETS == tuple(sorted(DEFAULT_BUCKETS)) and DEFAULT_BUCKETS[-1] >= 2048
    for rows in range(100, 2040, 7):
        bucket = next(b for b in DEFAULT_BUCKETS if rows < b)
        assert bucket - rows <= (64 if rows < 1024 else 128)
