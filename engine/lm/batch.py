"""Many plans generated together: the items of several requests (takes of one line, sentences of one
text, requests of different clients) run as sequences of shared batches, one forward per step.

Each sequence gets the tokens it gets alone. With the graph runner (`JoiningGeneration`) the plans of several
callers run on one running batch (engine/lm/continuous.py) that later callers join at step boundaries
(engine/gather.py), each caller's tokens handed out as soon as they are done (an item too large for every bucket
steps eagerly beside that batch). On the eager reference path
(`BatchedGeneration`) each plan draws from one torch.Generator in upstream's order (item after item), so its
items run in waves by index, the plans of a wave batched (each with its own generator: a draw for one never moves
another's), cut to fit the memory budget (engine/lm/budget.py) by its estimate of each batch.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import torch

from engine.config import GenerationConfig
from engine.lm.budget import MemoryBudget
from engine.lm.continuous import ContinuousBatch, Sequence
from engine.lm.decode import EagerGeneration, generate_tokens
from engine.lm.plan import Plan
from engine.lm.prompt import PromptItem
from engine.lm.runner import StaticRunner, packed_rows, score_key

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


def cut(count: int, fits: Callable[[range], bool]) -> list[range]:
    """Consecutive runs of `count` items, in order, each as long as `fits(run)` allows; an item that does not
    fit even alone is a run of its own."""
    runs, start = [], 0
    for i in range(1, count + 1):
        if i == count or not fits(range(start, i + 1)):
            runs.append(range(start, i))
            start = i
    return runs


@dataclass
class BatchedGeneration:
    """The eager reference path's batches (no graph runner)."""

    lm: torch.nn.Module
    budget: MemoryBudget
    device: torch.device

    def plans(self, plans: list[Plan], cfg: GenerationConfig, seeds: list[int], prompt_of: PromptOf,
              on_step: OnStep) -> list[list[torch.Tensor]]:
        """Tokens [C, T] of every item of every plan, per plan; plan j seeded seeds[j]."""
        outs: list[dict[int, torch.Tensor]] = [{} for _ in plans]
        generators = [torch.Generator(self.device).manual_seed(seed) for seed in seeds]
        for i in range(max(len(p.items) for p in plans)):
            wave = [(j, i) for j, p in enumerate(plans) if i < len(p.items)]
            self._wave(wave, plans, outs, cfg, prompt_of, on_step, generators)
        return [[out[i] for i in range(len(p.items))] for out, p in zip(outs, plans)]

    def _wave(self, wave: list[tuple[int, int]], plans: list[Plan], outs: list[dict], cfg: GenerationConfig,
              prompt_of: PromptOf, on_step: OnStep, generators: list[torch.Generator]) -> None:
        """Generate the (plan, item) pairs of one wave, in batches; their tokens go to outs[plan][item]."""
        prompts = [prompt_of(plans[j], i, outs[j].get(0) if plans[j].chunk0_is_reference and i > 0 else None)
                   for j, i in wave]
        for run in cut(len(prompts), lambda run: self.budget.fits_eager([prompts[r] for r in run])):
            tokens = generate_tokens(self.lm, [prompts[r] for r in run], cfg,
                                     [generators[wave[r][0]] for r in run], on_step=on_step)
            for r, t in zip(run, tokens):
                outs[wave[r][0]][wave[r][1]] = t


@dataclass(eq=False)
class _Job:
    """One caller's plans in a joining generation."""

    plans: list[Plan]
    seeds: list[int]
    outs: list[dict[int, torch.Tensor]]  # per plan: tokens [C, T] of its items done
    running: dict[Sequence, tuple[int, int]]  # its sequences in the batch: (plan, item)
    alone: dict[EagerGeneration, tuple[int, int]] = field(default_factory=dict)  # beside it (too large): (plan, item)

    @property
    def complete(self) -> bool:
        return all(len(out) == len(p.items) for out, p in zip(self.outs, self.plans))


@dataclass
class JoiningGeneration:
    """Plans of several callers on one running batch of the graph runner (engine/lm/continuous.py): a caller's
    plans join at the next step boundary after `add`, and `step` returns the callers whose items are all done.

    Item i of a plan seeded s is keyed `item_seed(s, i)` (engine/lm/noise.py) and gets exactly the tokens it gets
    alone, so the items of a plan need not wait for one another, except a plan without a voice, whose later chunks
    take chunk 0 as their reference: they join once chunk 0 is done. The batch is kept to the runner's largest bucket
    (the memory budget decided which buckets were captured, engine/lm/budget.py). An item too large for it even alone
    runs eagerly beside the batch (engine/lm/decode.py's EagerGeneration, seeded `item_seed`), one of its steps at
    each step of the batch: for its caller it is a member like any other (it advances step by step, `stop` drops it
    at the next boundary, its tokens are handed out at the step it finishes, the same whoever runs beside it), and
    the batch's members keep their exact tokens, each of their steps delayed by one eager step of it (its whole run
    spread over theirs, not run in one go while they wait for it)."""

    runner: StaticRunner
    device: torch.device
    cfg: GenerationConfig
    prompt_of: PromptOf
    jobs: dict[Hashable, _Job] = field(default_factory=dict)
    batch: ContinuousBatch | None = None

    def __post_init__(self):
        self.batch = ContinuousBatch(self.runner, self.cfg)

    @property
    def idle(self) -> bool:
        return not self.jobs

    def add(self, caller: Hashable, plans: list[Plan], seeds: list[int]) -> None:
        job = _Job(plans, seeds, [{} for _ in plans], {})
        self.jobs[caller] = job
        for j, plan in enumerate(plans):
            for i in range(len(plan.items)):
                if i == 0 or not plan.chunk0_is_reference:
                    self._add_item(job, j, i)

    def stop(self, caller: Hashable) -> None:
        """`caller`'s sequences leave at the next step boundary (those beside the batch too); it gets nothing."""
        for sequence in self.jobs.pop(caller).running:
            self.batch.stop(sequence)

    def catch_up(self) -> None:
        """Wait until the device is at most RUN_AHEAD steps behind the host (ContinuousBatch.catch_up)."""
        self.batch.catch_up()

    def set_aside(self) -> None:
        """Keep the batch's tokens out of the runner's buffers, which another batch uses meanwhile
        (ContinuousBatch.set_aside); the items beside it hold their own."""
        self.batch.set_aside()

    def step(self) -> list[tuple[Hashable, list[list[torch.Tensor]]]]:
        """One step of the batch: the callers done at it (none waits for a step when all its items are done),
        each with the tokens of every item of every plan, per plan."""
        if not any(job.running or job.alone for job in self.jobs.values()):
            return self._complete()
        alone = [(job, generation) for job in self.jobs.values() for generation in job.alone]  # before this step
        for sequence in self.batch.step():
            job = next(job for job in self.jobs.values() if sequence in job.running)
            self._done(job, *job.running.pop(sequence), sequence.tokens)
        for job, generation in alone:
            generation.step()
            if generation.finished:
                self._done(job, *job.alone.pop(generation), generation.tokens[0])
        return self._complete()

    def _done(self, job: _Job, j: int, i: int, tokens: torch.Tensor) -> None:
        """Item i of plan j has its tokens: the plan's later chunks follow when they take it as their reference."""
        job.outs[j][i] = tokens
        if i == 0 and job.plans[j].chunk0_is_reference:
            for later in range(1, len(job.plans[j].items)):
                self._add_item(job, j, later)

    def _complete(self) -> list[tuple[Hashable, list[list[torch.Tensor]]]]:
        done = [caller for caller, job in self.jobs.items() if job.complete]
        return [(caller, [[out[i] for i in range(len(p.items))] for out, p in zip(job.outs, job.plans)])
                for caller, job in ((caller, self.jobs.pop(caller)) for caller in done)]

    def _add_item(self, job: _Job, j: int, i: int) -> None:
        plan = job.plans[j]
        prompt = self.prompt_of(plan, i, job.outs[j].get(0) if plan.chunk0_is_reference and i > 0 else None)
        seed = item_seed(job.seeds[j], i)
        if self.runner.fits(prompt):
            job.running[self.batch.add(prompt, seed)] = (j, i)
            return
        log.warning("%d rows exceed the largest CUDA-graph bucket: running eagerly beside the batch",
                    packed_rows(prompt))
        generator = torch.Generator(self.device).manual_seed(seed)
        job.alone[EagerGeneration(self.runner.lm, [prompt], self.cfg, [generator])] = (j, i)
