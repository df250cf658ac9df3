"""The static-shape runner (what CUDA graphs replay) against the reference unmasking loop.

On the CPU the runner runs its static algorithm eagerly (no graphs): packed cond+uncond rows,
block-diagonal key ranges, head on the target rows only, rank-based top-k. With deterministic settings
it must give exactly the reference loop's tokens at fp32."""
import gc
import weakref
from dataclasses import fields

import pytest
import torch
from runner_reference import runner_tokens

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import generate_tokens, unmask_schedule
from engine.lm.model import KeyRanges
from engine.lm.noise import MAX_FRAMES, sequence_key
from engine.lm.prompt import build_prompt
from engine.lm.runner import (
    DEFAULT_BUCKETS,
    MAX_SCORE_SETTINGS,
    MAX_SEQUENCES,
    Buffers,
    StaticRunner,
    freeze_heap,
    pack,
    score_key,
)


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
    got = runner_tokens(runner, [prompt], cfg, [0])[0]
    assert got.shape == expected.shape == (8, target_len)
    assert torch.equal(got, expected)
    assert (got != lm.cfg.audio_mask_id).all()


def test_runner_sampling_is_seeded_and_complete(lm_and_tokenizer):
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, True, 30)
    cfg = GenerationConfig(class_temperature=0.7)
    runner = StaticRunner(lm, buckets=(256,))
    a, b, c = (runner_tokens(runner, [prompt], cfg, [seed])[0] for seed in (5, 5, 6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert (a != lm.cfg.audio_mask_id).all()


def test_pack_layout(lm_and_tokenizer):
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, True, 10)
    c, T, S = prompt.ids.shape[1], 10, 128
    p = pack([prompt], S, 1024, [unmask_schedule(T, 8, 32, 0.1)], [0])
    rows = torch.arange(S)
    want_start = torch.where(rows < c, 0, torch.where(rows < c + T, c, c + T))
    want_end = torch.where(rows < c, c, torch.where(rows < c + T, c + T, S))
    assert torch.equal(p.key_start, want_start.int()) and torch.equal(p.key_end, want_end.int())  # 3 blocks
    mask = KeyRanges(p.key_start, p.key_end).additive_mask(torch.float32)[0, 0]
    assert (mask[:c, :c] == 0).all() and (mask[c:c + T, c:c + T] == 0).all() and (mask[c + T:, c + T:] == 0).all()
    assert torch.isinf(mask[:c, c:]).all() and torch.isinf(mask[c:c + T, :c]).all()
    assert torch.isinf(mask[c + T:, :c + T]).all()  # pads see only pads
    assert torch.equal(p.positions[c:c + T], torch.arange(T))  # uncond rows restart at position 0
    assert torch.equal(p.ids[0, :, c:c + T], prompt.ids[:, -T:])
    assert int(p.schedule.sum()) == int(p.schedule[:, 0].sum()) == 8 * T
    with pytest.raises(ValueError):
        pack([prompt], c + T, 1024, [[8 * T]], [0])  # no room for the junk row


def test_pack_lays_out_each_sequence_at_its_own_step(lm_and_tokenizer):
    """Two sequences, the second at its own step 3: every buffer's value and dtype (what `load` copies into a
    captured step's static buffers)."""
    lm, tok = lm_and_tokenizer
    first, second = _prompt(lm, tok, True, 10), _prompt(lm, tok, False, 6, text="Short.")
    (c0, T0), (c1, T1), S, C = (first.ids.shape[1], 10), (second.ids.shape[1], 6), 256, 8
    schedules = [unmask_schedule(T0, C, 8, 0.1), unmask_schedule(T1, C, 8, 0.1)]
    p = pack([first, second], S, 1024, schedules, [7, 2**32 + 9], starts=[0, 3])
    r1, H, slots = c0 + T0, S // 2, T0 + T1  # the second sequence's first row; slots of both
    blocks = [(0, c0), (c0, r1), (r1, r1 + c1), (r1 + c1, r1 + c1 + T1), (r1 + c1 + T1, S)]
    assert p.key_start.tolist() == [a for a, b in blocks for _ in range(a, b)]
    assert p.key_end.tolist() == [b for a, b in blocks for _ in range(a, b)]
    assert p.positions.tolist() == [*range(c0), *range(T0), *range(c1), *range(T1), *[0] * (S - r1 - c1 - T1)]
    assert torch.equal(p.ids[0, :, r1:r1 + c1], second.ids) and torch.equal(p.ids[0, :, r1 + c1:r1 + c1 + T1],
                                                                             second.ids[:, -T1:])
    assert (p.ids[0, :, r1 + c1 + T1:] == 1024).all() and (p.tokens == 1024).all()
    assert p.audio_mask[0].tolist() == [*first.audio_mask.tolist(), *[True] * T0, *second.audio_mask.tolist(),
                                        *[True] * T1, *[False] * (S - r1 - c1 - T1)]
    junk = [S - 1] * (H - slots)
    assert p.cond_cols.tolist() == [*range(c0 - T0, c0), *range(r1 + c1 - T1, r1 + c1), *junk]
    assert p.uncond_cols.tolist() == [*range(c0, r1), *range(r1 + c1, r1 + c1 + T1), *junk]
    assert p.rows.tolist() == p.cond_cols.tolist() + p.uncond_cols.tolist()
    assert p.slot_sequence.tolist() == [0] * T0 + [1] * T1 + [MAX_SEQUENCES] * (H - slots)
    assert p.slot_frame.tolist() == [*range(T0), *(3 * C * MAX_FRAMES + t for t in range(T1)), *[0] * (H - slots)]
    assert p.slot_key.tolist() == [sequence_key(7)] * T0 + [sequence_key(2**32 + 9)] * T1 + [0] * (H - slots)
    assert p.rank_base.tolist() == [0] * T0 + [C * T0] * T1 + [C * slots] * (H - slots)
    assert p.sequence_slots.tolist() == [0, T0, *[slots] * (MAX_SEQUENCES - 1), H]
    assert p.schedule[:8, 0].tolist() == schedules[0] and p.schedule[:5, 1].tolist() == schedules[1][3:]
    assert not p.schedule[8:].any() and not p.schedule[5:, 1].any() and not p.schedule[:, 2:].any()
    assert p.valid.tolist() == [[True] * slots + [False] * (H - slots)] * C
    assert p.step.shape == () and int(p.step) == 0
    dtypes = {f.name: getattr(p, f.name).dtype for f in fields(Buffers)}
    assert dtypes == {**dict.fromkeys(dtypes, torch.long), "audio_mask": torch.bool, "valid": torch.bool,
                      "key_start": torch.int32, "key_end": torch.int32}


class _Node:
    pass


def test_freeze_heap_exempts_what_is_alive_and_frees_earlier_cycles():
    kept = _Node()
    assert any(o is kept for o in gc.get_objects())
    cycle = _Node()
    cycle.self = cycle  # only a collection can free it
    freed = weakref.ref(cycle)
    try:
        freeze_heap()
        assert not any(o is kept for o in gc.get_objects())  # frozen: collections skip it
        del cycle
        gc.collect()
        assert freed() is not None  # frozen garbage stays...
        freeze_heap()
        assert freed() is None  # ...until the next freeze releases it first (a replaced engine's memory)
    finally:
        gc.unfreeze()


def test_buckets_cover_long_prompts_and_batches_with_little_padding():
    assert DEFAULT_BUCKETS == tuple(sorted(DEFAULT_BUCKETS)) and DEFAULT_BUCKETS[-1] >= 8192
    for rows in range(100, 8180, 7):
        bucket = next(b for b in DEFAULT_BUCKETS if rows < b)
        assert bucket - rows <= (64 if rows < 1024 else 128 if rows < 2048 else 256 if rows < 4096 else 512)


def test_graphs_of_rarely_used_scoring_settings_are_dropped(lm_and_tokenizer):
    """Each scoring setting holds a graph per bucket: the cache keeps the MAX_SCORE_SETTINGS used last."""
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, False, 10)
    runner = StaticRunner(lm, buckets=(128,))
    guidances = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 1.0]
    for guidance in guidances:
        cfg = GenerationConfig(num_step=1, guidance_scale=guidance, position_temperature=0.0)
        runner_tokens(runner, [prompt], cfg, [0])
    kept = {key[1][0] for key in runner.graphs}
    assert len(runner.graphs) == MAX_SCORE_SETTINGS and kept == {1.0, 2.0, 2.5, 3.0}


def test_the_settings_captured_at_load_keep_their_graphs(lm_and_tokenizer):
    """The load-time capture is what a steady first latency rests on: other settings never evict it."""
    lm, tok = lm_and_tokenizer
    prompt = _prompt(lm, tok, False, 10)
    runner = StaticRunner(lm, buckets=(128,))
    loaded = GenerationConfig(num_step=1, position_temperature=0.0)
    runner.capture(loaded)
    captured = runner.graphs[(128, score_key(loaded))]
    for i in range(MAX_SCORE_SETTINGS + 2):
        cfg = GenerationConfig(num_step=1, guidance_scale=0.5 + 0.25 * i, position_temperature=0.0)
        runner_tokens(runner, [prompt], cfg, [0])
    assert runner.graphs[(128, score_key(loaded))] is captured  # the same capture, not a new one
    assert len(runner.graphs) == MAX_SCORE_SETTINGS + 1


def test_a_prompt_of_exactly_a_buckets_size_takes_the_next_bucket(lm_and_tokenizer):
    """A bucket keeps one row of pad: rows == bucket must go to the next one (or be refused), never overflow."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, 256))
    assert runner.bucket_for(127) == 128 and runner.bucket_for(128) == 256 and runner.bucket_for(256) is None
    assert runner.max_rows == 255
