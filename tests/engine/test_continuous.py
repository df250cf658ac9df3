"""Sequences joining and leaving a running batch at step boundaries get exactly the tokens they get alone
(engine/lm/continuous.py): the runner's static algorithm on the CPU, and its fused kernels (under Triton's
interpreter on a CPU). Position noise is on, so even the random reveal order must match."""
import gc

import pytest
import torch
from runner_reference import runner_tokens
from test_batch import CFG, GPU, SAMPLED, _kinds, _prompt, _ref

from engine.constants import DEMO_MODEL
from engine.lm import continuous
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.continuous import ContinuousBatch
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner, packed_rows


@pytest.fixture(scope="module")
def lm_and_tokenizer():
    return load_lm(DEMO_MODEL, "cpu", torch.float32), load_text_tokenizer(DEMO_MODEL)


@pytest.fixture(scope="module")
def prompts(lm_and_tokenizer):
    """Prompts of 123, 92, 87 and 44 packed rows, each with its own seed."""
    kinds = _kinds(*lm_and_tokenizer)
    sentences, requests = kinds["sentences"][0], kinds["requests"][0]
    return [(sentences[1], 11), (requests[0], 5), (sentences[0], 12), (requests[2], 7)]


def _run(batch: ContinuousBatch, joins: dict[int, list], stops: dict[int, list] | None = None) -> dict:
    """Step `batch` until it is idle, adding joins[g] (prompt, seed pairs) and stopping stops[g] (their indices
    among the joins, in order) before step g: {join index: (tokens, the step at which they came)}."""
    added, got = [], {}
    for g in range(100):  # bounded: a sequence that never joins fails instead of hanging
        if g > max(joins) and batch.idle:
            return got
        added += [batch.add(prompt, seed) for prompt, seed in joins.get(g, [])]
        for i in (stops or {}).get(g, []):
            batch.stop(added[i])
        for sequence in batch.step():
            got[added.index(sequence)] = (sequence.tokens, g)
    raise AssertionError(f"still running: {batch.members}, waiting: {batch.waiting}")


def _alone(runner, prompt, seed, cfg):
    return runner_tokens(runner, [prompt], cfg, [seed])[0]


@pytest.mark.parametrize("cfg", [CFG, SAMPLED], ids=["position noise", "class sampling"])
@pytest.mark.parametrize("at", [1, 4])
def test_a_sequence_joining_a_running_one_gets_its_solo_tokens_and_so_does_the_other(lm_and_tokenizer, prompts,
                                                                                     at, cfg):
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, 256))
    (a, sa), (b, sb) = prompts[:2]
    assert runner.bucket_for(packed_rows(a)) == 128 and runner.bucket_for(packed_rows(a) + packed_rows(b)) == 256
    got = _run(ContinuousBatch(runner, cfg), {0: [(a, sa)], at: [(b, sb)]})  # the join grows the bucket
    assert torch.equal(got[0][0], _alone(runner, a, sa, cfg))
    assert torch.equal(got[1][0], _alone(runner, b, sb, cfg))
    assert (got[0][1], got[1][1]) == (cfg.num_step - 1, at + cfg.num_step - 1)  # each handed out at its last step


def test_several_joins_and_leaves_each_get_their_solo_tokens(lm_and_tokenizer, prompts):
    """Four sequences joining at three boundaries, one of them stopped halfway: the others are untouched by it,
    by the joins and by the layout shrinking as the first ones finish."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, 256, 512))
    joins = {0: [prompts[0]], 2: [prompts[1], prompts[2]], 5: [prompts[3]]}
    got = _run(ContinuousBatch(runner, CFG), joins, stops={4: [2]})
    order = [p for g in sorted(joins) for p in joins[g]]
    assert sorted(got) == [0, 1, 3]  # the stopped one gets nothing
    for i in (0, 1, 3):
        assert torch.equal(got[i][0], _alone(runner, *order[i], CFG))
    assert [got[i][1] for i in (0, 1, 3)] == [5, 7, 10]


def test_a_join_that_does_not_fit_waits_for_room_in_the_order_added(lm_and_tokenizer, prompts, monkeypatch):
    """The largest bucket holds the first two and the fourth, not the third: the third waits for the first to
    finish, and the fourth waits behind it (no overtaking); at most MAX_SEQUENCES run likewise."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, 256, 288))
    (a, sa), (b, sb), (c, sc), (d, sd) = prompts
    rows = [packed_rows(p) for p, _ in prompts]
    assert rows[0] + rows[1] + rows[3] <= runner.max_rows < rows[0] + rows[1] + rows[2]
    got = _run(ContinuousBatch(runner, CFG), {0: [(a, sa)], 1: [(b, sb)], 2: [(c, sc), (d, sd)]})
    for i, (p, s) in enumerate(prompts):
        assert torch.equal(got[i][0], _alone(runner, p, s, CFG))
    assert [got[i][1] for i in range(4)] == [5, 6, 11, 11]  # c and d join once a has left (at step 6)

    monkeypatch.setattr(continuous, "MAX_SEQUENCES", 1)
    got = _run(ContinuousBatch(runner, CFG), {0: [(d, sd), (b, sb)]})
    assert [got[i][1] for i in range(2)] == [5, 11]  # one at a time
    assert torch.equal(got[1][0], _alone(runner, b, sb, CFG))


@pytest.mark.parametrize("pad", [1, 0], ids=["fills the bucket to its pad row", "one row too many"])
def test_a_join_at_the_largest_buckets_exact_limit(lm_and_tokenizer, prompts, pad):
    """The largest bucket holds a and d with `pad` rows to spare: with its one row of pad (the members take exactly
    `max_rows`) d joins at the next boundary; without, it waits for a to leave. Both get their solo tokens."""
    (a, sa), (d, sd) = prompts[0], prompts[3]
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, packed_rows(a) + packed_rows(d) + pad))
    assert packed_rows(a) + packed_rows(d) == runner.max_rows + 1 - pad
    got = _run(ContinuousBatch(runner, CFG), {0: [(a, sa)], 1: [(d, sd)]})
    joined = 1 if pad else CFG.num_step  # at once, or once a has left
    assert (got[0][1], got[1][1]) == (CFG.num_step - 1, joined + CFG.num_step - 1)
    assert torch.equal(got[0][0], _alone(runner, a, sa, CFG))
    assert torch.equal(got[1][0], _alone(runner, d, sd, CFG))


def test_a_sequence_stopped_while_it_waits_gives_its_place_to_the_one_behind(lm_and_tokenizer, prompts):
    """c waits (no room beside a and b) and d behind it; c stopped, d joins at that boundary, beside a and b."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, 256, 288))
    (a, sa), (b, sb), (c, sc), (d, sd) = prompts
    rows = [packed_rows(p) for p, _ in prompts]
    assert rows[0] + rows[1] + rows[3] <= runner.max_rows < rows[0] + rows[1] + rows[2]
    got = _run(ContinuousBatch(runner, CFG), {0: [(a, sa), (b, sb)], 1: [(c, sc), (d, sd)]}, stops={2: [2]})
    assert sorted(got) == [0, 1, 3] and got[3][1] == 2 + CFG.num_step - 1
    assert torch.equal(got[3][0], _alone(runner, d, sd, CFG))


def test_a_reference_kept_on_the_device_is_in_every_layout_it_runs_in(lm_and_tokenizer, prompts):
    """A later chunk's reference (chunk 0's tokens, PromptItem.device_ref: MASK in the host's layout) is written into
    the layout it joins and into those packed while it runs (another joins at step 3, the first leaves at step 6): its
    tokens are those of the same prompt with the reference on the host."""
    lm, tok = lm_and_tokenizer
    ref = _ref(20, seed=4)
    on_host = _prompt(lm, tok, "The next chunk.", 9, ref)
    kept = build_prompt(tok, lm.cfg, "The next chunk.", 9, ref_text="Some words here.", generated_ref=ref,
                        language="en")
    assert kept.device_ref is not None and not torch.equal(kept.ids, on_host.ids)
    runner = StaticRunner(lm, buckets=(128, 256, 512))
    got = _run(ContinuousBatch(runner, CFG), {0: [prompts[0]], 1: [(kept, 3)], 3: [prompts[3]]})
    assert torch.equal(got[1][0], _alone(runner, on_host, 3, CFG))
    assert torch.equal(got[0][0], _alone(runner, *prompts[0], CFG))


def test_a_prompt_larger_than_every_bucket_is_refused(lm_and_tokenizer, prompts):
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(64, 96))
    batch = ContinuousBatch(runner, CFG)
    with pytest.raises(ValueError):
        batch.add(*prompts[0])  # 123 rows
    assert batch.idle


def test_fused_kernels_give_a_joining_sequence_its_solo_tokens(lm_and_tokenizer):
    """The GPU path's kernels (ragged attention, fused scoring and reveal reading the shifted schedule and noise
    counter): compiled and replayed from CUDA graphs on a GPU, under Triton's interpreter on a CPU."""
    pytest.importorskip("triton")
    _, tok = lm_and_tokenizer
    fused = load_lm(DEMO_MODEL, GPU).use_fused_kernels()
    a, b = _prompt(fused, tok, "Hi.", 5, _ref(6)), _prompt(fused, tok, "Hello.", 4)
    runner = StaticRunner(fused, buckets=(48, 80), fused=True)
    cfg = CFG.replace(num_step=3)
    got = _run(ContinuousBatch(runner, cfg), {0: [(a, 1)], 1: [(b, 2)]})
    assert torch.equal(got[0][0], _alone(runner, a, 1, cfg))
    assert torch.equal(got[1][0], _alone(runner, b, 2, cfg))


def test_a_stopped_sequence_leaves_the_layout_at_the_next_boundary(lm_and_tokenizer, prompts):
    """Its rows are given back at once (a smaller bucket), not when something else changes."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128, 256))
    batch = ContinuousBatch(runner, CFG)
    (a, sa), (b, sb) = prompts[:2]
    kept, stopped = batch.add(a, sa), batch.add(b, sb)
    for _ in range(2):
        batch.step()
    assert batch.entry.buffers.ids.shape[-1] == 256
    batch.stop(stopped)
    batch.step()
    assert batch.members == [kept] and batch.entry.buffers.ids.shape[-1] == 128
    while not batch.idle:
        batch.step()
    assert stopped.tokens is None and torch.equal(kept.tokens, _alone(runner, a, sa, CFG))


def test_steps_run_with_the_garbage_collector_paused(lm_and_tokenizer, prompts, monkeypatch):
    """A collection in a process holding the app would stall the launches for tens of ms."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(128,))
    seen = []
    replay = runner.replay
    monkeypatch.setattr(runner, "replay", lambda entry, cfg: seen.append(gc.isenabled()) or replay(entry, cfg))
    batch = ContinuousBatch(runner, CFG.replace(num_step=3))
    batch.add(*prompts[3])
    while not batch.idle:
        batch.step()
    assert seen == [False] * 3 and gc.isenabled()  # off while the steps are launched, back on after
    gc.disable()
    try:
        batch.add(*prompts[3])
        batch.step()
        assert not gc.isenabled()  # a caller's choice is left as it was
    finally:
        gc.enable()


@pytest.mark.parametrize("stop", [False, True], ids=["both run on", "one stopped meanwhile"])
def test_a_batch_set_aside_while_another_uses_its_buffers_runs_on_with_its_solo_tokens(lm_and_tokenizer, prompts, stop):
    """ContinuousBatch.set_aside at a step boundary, another batch run in the same bucket's buffers meanwhile (as
    engine/gather.py's give_way does): the batch runs on with every sequence's solo tokens, one whose caller left
    meanwhile (`stop`) left out."""
    runner = StaticRunner(lm_and_tokenizer[0], buckets=(256,))
    (a, sa), (b, sb), (c, sc), _ = prompts
    assert packed_rows(a) + packed_rows(b) < 256  # one bucket for all: the buffers are shared
    aside = ContinuousBatch(runner, CFG)
    kept, other = aside.add(a, sa), aside.add(b, sb)
    for _ in range(2):
        aside.step()
    aside.set_aside()
    if stop:
        aside.stop(other)
    first = ContinuousBatch(runner, CFG)
    started = first.add(c, sc)
    while not first.idle:
        first.step()
    while not aside.idle:
        aside.step()
    assert torch.equal(started.tokens, _alone(runner, c, sc, CFG))
    assert torch.equal(kept.tokens, _alone(runner, a, sa, CFG))
    if stop:
        assert other.tokens is None
    else:
        assert torch.equal(other.tokens, _alone(runner, b, sb, CFG))
