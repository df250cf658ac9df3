"""Many plans generated together: the items of several requests (takes of one line, sentences of one
text, requests of different clients) run as sequences of shared batches, one forward per step.

Each sequence gets the tokens it gets alone. With the graph runner its noise is keyed by its own
seed (engine/lm/noise.py), so the items of a plan need not wait for one another, except a plan
without a voice, whose later chunks take chunk 0 as their reference: everything else runs in the
first wave, those later chunks in the second. On the eager reference path each plan draws from one
torch.Generator in upstream's order (item after item), so its items run in waves by index, the
plans of a wave batched (each with its own generator: a draw for one never moves another's).
Batches are cut to fit the memory budget (engine/lm/budget.py): on the eager path by its estimate of
each batch, with the runner by its largest bucket (the budget decided which buckets were captured).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.config import GenerationConfig
from engine.lm.budget import MemoryBudget
from engine.lm.decode import generate_tokens
from engine.lm.plan import Plan
from engine.lm.prompt import PromptItem
from engine.lm.runner import MAX_SEQUENCES, StaticRunner, packed_rows, score_key

log = logging.getLogger(__name__)

PromptOf = Callable[[Plan, int, "torch.Tensor | None"], PromptItem]  # (plan, item, chunk 0's tokens)
OnStep = Callable[[int], None]


def shared_settings(cfg: GenerationConfig) -> tuple:
    """The settings every sequence of one batch shares: the steps, their schedule and the scoring. The rest
    (speed, duration, seed, text handling, finishing) belongs to each request's plan or its decoding."""
    return (cfg.num_step, cfg.t_shift, *score_key(cfg))


def item_seed(seed: int, index: int) -> int:
    """The runner's noise seed of item `index` of a plan seeded `seed` (both halves reach the key)."""
    return seed + (index << 32)


def cut(count: int, fits: Callable[[range], bool], max_count: int) -> list[range]:
    """Consecutive runs of `count` items, in order, each as long as `fits(run)` allows (and at most
    `max_count`); an item that does not fit even alone is a run of its own."""
    runs, start = [], 0
    for i in range(1, count + 1):
        if i == count or i - start >= max_count or not fits(range(start, i + 1)):
            runs.append(range(start, i))
            start = i
    return runs


@dataclass
class BatchedGeneration:
    lm: torch.nn.Module
    runner: StaticRunner | None
    budget: MemoryBudget
    device: torch.device

    def plans(self, plans: list[Plan], cfg: GenerationConfig, seeds: list[int], prompt_of: PromptOf,
              on_step: OnStep) -> list[list[torch.Tensor]]:
        """Tokens [C, T] of every item of every plan, per plan; plan j seeded seeds[j]."""
        outs: list[dict[int, torch.Tensor]] = [{} for _ in plans]
        if self.runner is None:
            generators = [torch.Generator(self.device).manual_seed(seed) for seed in seeds]
            for i in range(max(len(p.items) for p in plans)):
                wave = [(j, i) for j, p in enumerate(plans) if i < len(p.items)]
                self._wave(wave, plans, outs, cfg, prompt_of, on_step, generators=generators)
        else:
            first = [(j, i) for j, p in enumerate(plans) for i in range(len(p.items))
                     if i == 0 or not p.chunk0_is_reference]
            later = [(j, i) for j, p in enumerate(plans) for i in range(1, len(p.items)) if p.chunk0_is_reference]
            for wave in (first, later):
                self._wave(wave, plans, outs, cfg, prompt_of, on_step, seeds=seeds)
        return [[out[i] for i in range(len(p.items))] for out, p in zip(outs, plans)]

    def _wave(self, wave: list[tuple[int, int]], plans: list[Plan], outs: list[dict], cfg: GenerationConfig,
              prompt_of: PromptOf, on_step: OnStep, generators: list[torch.Generator] | None = None,
              seeds: list[int] | None = None) -> None:
        """Generate the (plan, item) pairs of one wave, in batches; their tokens go to outs[plan][item]."""
        if not wave:
            return
        prompts = [prompt_of(plans[j], i, outs[j].get(0) if plans[j].chunk0_is_reference and i > 0 else None)
                   for j, i in wave]
        if generators is not None:
            for run in cut(len(prompts), lambda run: self.budget.fits_eager([prompts[r] for r in run]), len(prompts)):
                tokens = generate_tokens(self.lm, [prompts[r] for r in run], cfg,
                                         [generators[wave[r][0]] for r in run], on_step=on_step)
                for r, t in zip(run, tokens):
                    outs[wave[r][0]][wave[r][1]] = t
            return
        keys = [item_seed(seeds[j], i) for j, i in wave]
        runner = self.runner
        rows = [packed_rows(p) for p in prompts]
        for run in cut(len(prompts), lambda run: sum(rows[r] for r in run) <= runner.max_rows, MAX_SEQUENCES):
            batch = [prompts[r] for r in run]
            if len(batch) == 1 and not runner.fits(batch[0]):
                log.warning("%d rows exceed the largest CUDA-graph bucket: running eagerly", packed_rows(batch[0]))
                generator = torch.Generator(self.device).manual_seed(keys[run[0]])
                tokens = generate_tokens(self.lm, batch, cfg, [generator], on_step=on_step)
            else:
                tokens = runner.generate(batch, cfg, [keys[r] for r in run], on_step=on_step)
            for r, t in zip(run, tokens):
                outs[wave[r][0]][wave[r][1]] = t
