"""A batch never takes more than the memory budget: the eager loop cuts its batches by the budget's
estimate, and the graph runner only has the buckets whose step fits it (a batch is cut to its largest).
On a GPU, tools/bench_batch.py reports the estimate beside the allocator's peak (no test compares them)."""
import dataclasses

import torch

import engine.lm.batch as batch_module
from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.budget import MemoryBudget
from engine.lm.runner import DEFAULT_BUCKETS, StaticRunner

TEXT = "One line, said four times."
CFG = GenerationConfig(num_step=2, seed=3)


def _spy(monkeypatch, target, name, seen):
    real = getattr(target, name)

    def spied(*args, **kwargs):
        prompts = next(a for a in args if isinstance(a, list))
        seen.append(prompts)
        return real(*args, **kwargs)
    monkeypatch.setattr(target, name, spied)


def test_eager_batches_are_cut_to_the_budget(engine, voice, monkeypatch):
    seen = []
    _spy(monkeypatch, batch_module, "generate_tokens", seen)
    whole = engine.takes(TEXT, voice, config=CFG, n=4)  # the CPU's default budget holds all four
    assert [len(p) for p in seen] == [4]
    two = seen[0][:2]
    budget = dataclasses.replace(engine.budget, bytes=engine.budget.eager_bytes(two))  # room for two at a time
    monkeypatch.setattr(engine, "budget", budget)
    seen.clear()
    cut = engine.takes(TEXT, voice, config=CFG, n=4)
    assert [len(p) for p in seen] == [2, 2] and all(budget.eager_bytes(p) <= budget.bytes for p in seen)
    for a, b in zip(whole, cut):  # cutting changes nothing in the takes
        assert all(x.equal(y) for x, y in zip(a.tokens, b.tokens))


def test_the_runner_has_only_the_buckets_the_budget_holds(engine, voice, monkeypatch):
    budget = dataclasses.replace(engine.budget, bytes=engine.budget.runner_bytes(512))
    kept = budget.buckets(DEFAULT_BUCKETS)
    assert kept == tuple(b for b in DEFAULT_BUCKETS if b <= 512)
    assert dataclasses.replace(budget, bytes=0).buckets(DEFAULT_BUCKETS) == (DEFAULT_BUCKETS[0],)  # one always runs
    runner = StaticRunner(engine.lm, buckets=kept)
    layouts = []  # (bucket, sequences) of every layout the running batch was packed into
    load = runner.load
    monkeypatch.setattr(runner, "load", lambda packed, cfg: layouts.append(
        (packed.ids.shape[-1], int((packed.schedule.sum(0) > 0).sum()))) or load(packed, cfg))
    monkeypatch.setattr(engine, "runner", runner)
    takes = engine.takes(TEXT, voice, config=CFG, n=6)
    assert len(takes) == 6 and max(n for _, n in layouts) < 6  # six takes do not fit 512 rows at once
    assert all(budget.runner_bytes(bucket) <= budget.bytes for bucket, _ in layouts)


def test_the_budget_is_a_share_of_the_free_gpu_memory(monkeypatch):
    from engine.lm.checkpoint import load_lm

    lm = load_lm(DEMO_MODEL, "cpu", torch.float32)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * 2**30, 24 * 2**30))
    gpu = MemoryBudget.for_device(torch.device("cuda"), lm.cfg, torch.float16)
    assert gpu.bytes == 5 * 2**30 and gpu.dtype_bytes == 2
    assert MemoryBudget.for_device(torch.device("cpu"), lm.cfg, torch.float32, cpu_bytes=123).bytes == 123


def test_an_eager_batch_is_estimated_padded_to_its_longest_prompt():
    """upstream's CFG batch pads every row to the longest prompt: a short prompt beside a long one is estimated above
    the long one alone (`cut` grows a run while its estimate fits: it must never fall as a prompt joins)."""
    from engine.config import ModelConfig
    from engine.lm.prompt import PromptItem

    def prompt(length: int, target: int) -> PromptItem:
        return PromptItem(torch.zeros(8, length, dtype=torch.long), torch.zeros(length, dtype=torch.bool), target)

    budget = MemoryBudget(2**40, ModelConfig(), 2)  # the released model's shapes, fp16
    short, long = prompt(20, 5), prompt(400, 100)
    assert budget.eager_bytes([short, long]) > budget.eager_bytes([long]) > budget.eager_bytes([short, short])
