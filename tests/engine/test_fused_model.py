"""The model and the static runner with the fused Triton kernels switched on, run on the CPU under
Triton's interpreter (tests/conftest.py), against the plain PyTorch path: this checks the adapters in
engine/lm/fused_ops.py (layouts, views, the residual order) that the GPU fast path uses."""

import pytest
import torch

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import build_cfg_batch, generate_tokens
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner

pytest.importorskip("triton")


@pytest.fixture(scope="module")
def models_and_prompt():
    plain, fused = load_lm(DEMO_MODEL), load_lm(DEMO_MODEL).use_fused_kernels()
    tok = load_text_tokenizer(DEMO_MODEL)
    ref = torch.randint(0, 1024, (8, 12), generator=torch.Generator().manual_seed(1))
    prompt = build_prompt(tok, plain.cfg, "Hello there.", 8, ref_text="Words.",
                          ref_tokens=ref, language="en")
    return plain, fused, prompt


def test_fused_forward_matches_the_torch_path(models_and_prompt):
    plain, fused, prompt = models_and_prompt
    batch = build_cfg_batch([prompt], plain.cfg.audio_mask_id, "cpu")
    with torch.inference_mode():
        want = plain(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
        got = fused(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_fused_runner_gives_the_reference_tokens(models_and_prompt):
    plain, fused, prompt = models_and_prompt
    cfg = GenerationConfig(position_temperature=0.0, num_step=4)
    want = generate_tokens(plain, [prompt], cfg, torch.Generator().manual_seed(0))[0]
    got = StaticRunner(fused, buckets=(64,), fused=True).generate(prompt, cfg)
    assert torch.equal(got, want)
