"""The unmasking loop against upstream's recorded generations: schedules, greedy tokens, seeded tokens."""
import pytest
import torch
from golden_calls import golden_requests, greedy_calls, seeded_calls

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.errors import Cancelled
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import (
    generate_tokens,
    keep_top_classes,
    predict_and_score,
    score_and_update,
    unmask_schedule,
)
from engine.lm.prompt import build_prompt

CALLS = greedy_calls()
SEEDED = seeded_calls()
SHORTEST = min(CALLS, key=lambda c: c.facts["cond_len"])
CHUNKED = [name for name, calls in golden_requests().items() if len(calls) > 1]


@pytest.fixture(scope="module")
def lm():
    return load_lm(DEMO_MODEL)


def _generate(lm, call, seed=0, **changes):
    cfg = call.config.replace(**changes)
    return generate_tokens(lm, [call.prompt], cfg, torch.Generator().manual_seed(seed))[0]


@pytest.mark.parametrize("call", CALLS + SEEDED, ids=[c.name for c in CALLS + SEEDED])
def test_schedule_matches_upstream(call):
    cfg = call.config
    ours = unmask_schedule(call.facts["target_len"], 8, cfg.num_step, cfg.t_shift)
    assert ours == call.facts["schedule"]


@pytest.mark.parametrize("target_len", [1, 2, 7, 50, 251, 750])
@pytest.mark.parametrize("num_step", [1, 4, 32])
def test_schedule_reveals_every_slot_once(target_len, num_step):
    counts = unmask_schedule(target_len, 8, num_step, 0.1)
    assert len(counts) == num_step and sum(counts) == 8 * target_len and min(counts) >= 0


@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_greedy_tokens_match_upstream(lm, call):
    assert call.config.position_temperature == 0
    assert _generate(lm, call).tolist() == call.tensors["tokens"].tolist()


@pytest.mark.parametrize("call", SEEDED, ids=[c.name for c in SEEDED])
def test_seeded_tokens_match_upstream(lm, call):
    """Upstream seeded with torch.manual_seed(s) draws the same noise as our Generator seeded with s:
    position sampling, class sampling (top 10 % + Gumbel) and both interleaved."""
    assert call.config.position_temperature > 0 or call.config.class_temperature > 0
    assert _generate(lm, call, seed=call.seed).tolist() == call.tensors["tokens"].tolist()


def test_same_seed_same_tokens(lm):
    call = SHORTEST
    first, again, other = (_generate(lm, call, seed=s, num_step=8, position_temperature=5.0,
                                     class_temperature=1.0) for s in (7, 7, 8))
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert (first != lm.cfg.audio_mask_id).all()


def test_batch_of_two_matches_each_alone(lm):
    """Two prompts of different lengths in one CFG batch (pads at the end) give upstream's tokens."""
    a, b = (c for c in CALLS if c.name in ("auto_en", "design_en"))
    assert a.config == b.config and a.prompt.ids.shape != b.prompt.ids.shape
    together = generate_tokens(lm, [a.prompt, b.prompt], a.config, torch.Generator())
    assert [t.tolist() for t in together] == [a.tensors["tokens"].tolist(), b.tensors["tokens"].tolist()]


@pytest.mark.parametrize("name", CHUNKED)
def test_chunks_chain_like_upstream(lm, name):
    """Long text: chunks are generated in turn; without a reference, chunk 0's tokens and text become
    the reference of the later chunks (upstream `_generate_chunked`). Each chunk's own tokens are
    checked by test_greedy_tokens_match_upstream; here, that every later prompt is upstream's."""
    tokenizer, calls = load_text_tokenizer(DEMO_MODEL), golden_requests()[name]
    has_ref = calls[0].facts["ref_len"] is not None
    first = None if has_ref else _generate(lm, calls[0])
    for call in calls[1:]:
        f = call.facts
        ref_tokens = call.ref_tokens if has_ref else first
        assert has_ref or f["ref_text"] == calls[0].facts["text"]
        prompt = build_prompt(tokenizer, lm.cfg, f["text"], f["target_len"], ref_text=f["ref_text"],
                              ref_tokens=ref_tokens, language=f["lang"], instruct=f["instruct"],
                              denoise=call.config.denoise)
        assert torch.equal(prompt.ids, call.tensors["cond_input_ids"])


def test_seeded_goldens_cover_class_sampling_alone_and_with_position_sampling():
    kinds = {(c.config.position_temperature > 0, c.config.class_temperature > 0) for c in SEEDED}
    assert {(True, False), (True, True), (False, True)} <= kinds


@pytest.mark.parametrize("changes", [{}, {"guidance_scale": 0.0}, {"class_temperature": 1.0},
                                     {"position_temperature": 5.0, "class_temperature": 0.5}])
def test_the_mask_id_never_wins_even_when_the_model_prefers_it(changes):
    """The codec has codes 0..1023: a predicted 1024 (MASK) must be impossible whatever the logits say."""
    gen = torch.Generator().manual_seed(0)
    cond, uncond = torch.randn(8, 6, 1025, generator=gen), torch.randn(8, 6, 1025, generator=gen)
    cond[..., 1024] += 40.0  # MASK is by far the most likely class, with and without guidance
    uncond[..., 1024] += 40.0
    tokens = torch.full((8, 6), 1024)
    cfg = GenerationConfig(position_temperature=0.0).replace(**changes)
    predicted, scores = predict_and_score(cond, uncond, tokens, cfg, 1024, gen)
    assert (predicted < 1024).all() and torch.isfinite(scores).all()
    score_and_update(cond, uncond, tokens, 48, cfg, 1024, gen)
    assert (tokens != 1024).all()


def test_class_sampling_keeps_the_top_tenth():
    log_probs = torch.randn(2, 3, 1025).log_softmax(-1)
    kept = keep_top_classes(log_probs)
    assert (torch.isfinite(kept).sum(-1) == 103).all()
    assert torch.equal(kept.argmax(-1), log_probs.argmax(-1))


def test_cancel_between_steps(lm):
    seen = []

    def stop_at_third(step):
        seen.append(step)
        if step == 2:
            raise Cancelled("Stopped.")

    with pytest.raises(Cancelled):
        generate_tokens(lm, [SHORTEST.prompt], GenerationConfig(), torch.Generator(), on_step=stop_at_third)
    assert seen == [0, 1, 2]
