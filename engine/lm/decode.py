"""The iterative unmasking loop (upstream `_generate_iterative`) as tensor code.

One step = one forward of the model over the classifier-free-guidance batch (`eager_forward`; the
graph runner, engine/lm/runner.py, runs the same algorithm on its own static layout) followed by
`score_and_update` per item, which is a function of tensors only. Randomness comes from one
`torch.Generator`, drawn in upstream's order, so that a seed reproduces a generation (and matches
upstream seeded with `torch.manual_seed` on the CPU).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from engine.config import GenerationConfig
from engine.lm.prompt import PromptItem

CLASS_TOP_RATIO = 0.1  # class sampling keeps the top 10 % of the audio vocabulary


@functools.lru_cache(maxsize=64)  # the same few settings for every sequence: its tensors cost ~20 us each time
def time_steps(num_step: int, t_shift: float) -> tuple[float, ...]:
    """Shifted diffusion times t' = s t / (1 + (s - 1) t) on a float32 grid of num_step + 1 points."""
    t = torch.linspace(0.0, 1.0, num_step + 1)  # float32, as upstream: float64 moves some counts by 1
    return tuple((t_shift * t / (1 + (t_shift - 1) * t)).tolist())


def unmask_schedule(target_len: int, num_codebooks: int, num_step: int, t_shift: float) -> list[int]:
    """How many of the num_codebooks * target_len slots each step reveals (the last step takes the rest)."""
    t = time_steps(num_step, t_shift)
    total = remaining = target_len * num_codebooks
    counts = []
    for step in range(num_step):
        k = remaining if step == num_step - 1 else min(math.ceil(total * (t[step + 1] - t[step])), remaining)
        counts.append(k)
        remaining -= k
    return counts


@dataclass
class CfgBatch:
    """2B rows: item i's full prompt in row i (cond) and only its target in row B + i (uncond).

    rows: flat (row * S + position) indices of the target positions, per item cond then uncond,
    items in order; `forward(batch)` returns logits [len(rows), C, V] for exactly these.
    """

    input_ids: torch.Tensor  # [2B, C, S] long
    audio_mask: torch.Tensor  # [2B, S] bool
    attn_mask: torch.Tensor  # [2B, 1, S, S] bool, True = may attend
    cond_lens: list[int]
    target_lens: list[int]
    rows: torch.Tensor  # [sum 2 T_i] long


Forward = Callable[[CfgBatch], torch.Tensor]


def build_cfg_batch(prompts: list[PromptItem], mask_id: int, device: torch.device | str) -> CfgBatch:
    """Upstream's CFG batch, padded at the end to the longest prompt with `mask_id`.

    Uncond rows hold the target at positions 0..T-1 (no text, no reference). Every pad position
    attends to itself only: real positions never see pads, and no softmax row is empty (upstream
    leaves cond pad rows all-False, which changes nothing at real positions).
    """
    B, C = len(prompts), prompts[0].ids.shape[0]
    cond_lens = [p.ids.shape[1] for p in prompts]
    target_lens = [p.target_len for p in prompts]
    S = max(cond_lens)
    ids = torch.full((2 * B, C, S), mask_id, dtype=torch.long, device=device)
    audio_mask = torch.zeros(2 * B, S, dtype=torch.bool, device=device)
    attn = torch.eye(S, dtype=torch.bool, device=device).repeat(2 * B, 1, 1, 1)  # [2B, 1, S, S]
    rows = []
    for i, (p, c_len, t_len) in enumerate(zip(prompts, cond_lens, target_lens)):
        ids[i, :, :c_len] = p.ids
        p.write_device_ref(ids[i, :, :c_len])
        audio_mask[i, :c_len] = p.audio_mask
        attn[i, :, :c_len, :c_len] = True
        ids[B + i, :, :t_len] = p.ids[:, -t_len:]
        audio_mask[B + i, :t_len] = True
        attn[B + i, :, :t_len, :t_len] = True
        rows += [torch.arange(c_len - t_len, c_len) + i * S, torch.arange(t_len) + (B + i) * S]
    return CfgBatch(ids, audio_mask, attn, cond_lens, target_lens, torch.cat(rows).to(device))


def gumbel_perturb(logits: torch.Tensor, temperature: float, generator: torch.Generator | None,
                   uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """logits / temperature + Gumbel noise (upstream's formula, eps 1e-10), from `generator` or from
    the given `uniforms` (same shape)."""
    u = uniforms if uniforms is not None else torch.rand(logits.shape, generator=generator, device=logits.device,
                                                         dtype=logits.dtype)
    return logits / temperature - torch.log(-torch.log(u + 1e-10) + 1e-10)


def keep_top_classes(log_probs: torch.Tensor, ratio: float = CLASS_TOP_RATIO) -> torch.Tensor:
    """-inf everywhere but the ceil(ratio * V) largest entries of the last dim."""
    values, index = log_probs.topk(math.ceil(ratio * log_probs.shape[-1]), dim=-1)
    return torch.full_like(log_probs, float("-inf")).scatter_(-1, index, values)


def guided_log_probs(cond: torch.Tensor, uncond: torch.Tensor, guidance_scale: float, mask_id: int) -> torch.Tensor:
    """CFG in log-probability space, fp32: [C, T, V] x2 -> [C, T, V], MASK ruled out after guidance."""
    c = F.log_softmax(cond, dim=-1)
    if guidance_scale != 0:
        c = F.log_softmax(c + guidance_scale * (c - F.log_softmax(uncond, dim=-1)), dim=-1)
    c[..., mask_id] = float("-inf")
    return c


class SlotNoise(Protocol):
    """Uniforms for every target slot, in place of a torch.Generator (the graph runner's, engine/lm/noise.py)."""

    def positions(self) -> torch.Tensor: ...  # [C, T]

    def classes(self, num_classes: int) -> torch.Tensor: ...  # [C, T, V]


def predict_and_score(cond: torch.Tensor, uncond: torch.Tensor, tokens: torch.Tensor, cfg: GenerationConfig,
                      mask_id: int, generator: torch.Generator | None,
                      fused: bool = False, noise: SlotNoise | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted class and reveal priority of every target slot: ([C, T] long, [C, T] fp32).

    cond/uncond: logits [C, T, V] (fp32, or fp16 when `fused`); tokens [C, T]: current tokens (MASK
    where not revealed). The priority is the guided log-probability of the predicted class minus a
    penalty growing with the codebook index, perturbed by Gumbel noise at `position_temperature`;
    already revealed slots get -inf, so they are never masked again. `fused` computes the greedy
    case with one Triton kernel (kernels/cfg_score.py, same fp32 math). The noise comes from
    `noise` when given, else from `generator`.
    """
    if fused and cfg.class_temperature == 0:
        from kernels.cfg_score import cfg_score

        predicted, scores = cfg_score(cond, uncond, cfg.guidance_scale, cfg.layer_penalty_factor, mask_id)
    else:
        log_probs = guided_log_probs(cond.float(), uncond.float(), cfg.guidance_scale, mask_id)
        if cfg.class_temperature > 0:
            u = noise.classes(log_probs.shape[-1]) if noise is not None else None
            predicted = gumbel_perturb(keep_top_classes(log_probs), cfg.class_temperature, generator, u).argmax(-1)
        else:
            predicted = log_probs.argmax(-1)  # [C, T]
        codebook = torch.arange(tokens.shape[0], device=tokens.device).view(-1, 1)  # [C, 1]
        scores = log_probs.max(-1).values - codebook * cfg.layer_penalty_factor  # [C, T]
    if cfg.position_temperature > 0:
        u = noise.positions() if noise is not None else None
        scores = gumbel_perturb(scores, cfg.position_temperature, generator, u)
    return predicted, scores.masked_fill(tokens != mask_id, float("-inf"))


def score_and_update(cond: torch.Tensor, uncond: torch.Tensor, tokens: torch.Tensor, k: int,
                     cfg: GenerationConfig, mask_id: int, generator: torch.Generator) -> None:
    """Reveal the k most confident still-masked slots of `tokens` [C, T] (in place), ranked over
    the flattened, codebook-major [C * T]. Revealed slots are never masked again."""
    predicted, scores = predict_and_score(cond, uncond, tokens, cfg, mask_id, generator)
    chosen = scores.flatten().topk(k).indices
    tokens.view(-1)[chosen] = predicted.flatten()[chosen]


def eager_forward(lm: torch.nn.Module) -> Forward:
    """Run the model as is on the whole CFG batch, returning logits of the target rows only."""
    return lambda batch: lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)


class EagerGeneration:
    """The unmasking loop of every prompt together, one step at a time: `step()` cfg.num_step times, then `tokens`
    (one LongTensor [C, T_i] per prompt). Between two steps its caller may stop it or do other work (JoiningGeneration
    runs an item too large for the graph runner's buckets so, beside its running batch).

    generator: one for all prompts (drawn in prompt order), or one per prompt (takes of one line
    that each equal a lone generation seeded alike)."""

    def __init__(self, lm: torch.nn.Module, prompts: list[PromptItem], cfg: GenerationConfig,
                 generator: torch.Generator | list[torch.Generator]):
        self.cfg, self.mask_id = cfg, lm.cfg.audio_mask_id
        device = next(lm.parameters()).device
        self.forward = eager_forward(lm)
        self.batch = build_cfg_batch(prompts, self.mask_id, device)
        self.generators = generator if isinstance(generator, list) else [generator] * len(prompts)
        self.schedules = [unmask_schedule(t, lm.cfg.num_codebooks, cfg.num_step, cfg.t_shift)
                          for t in self.batch.target_lens]
        self.tokens = [p.ids[:, -p.target_len:].clone().to(device) for p in prompts]  # all MASK
        self.done = 0  # steps taken

    @property
    def finished(self) -> bool:
        return self.done == self.cfg.num_step

    def step(self) -> None:
        batch, B, step = self.batch, len(self.tokens), self.done
        with torch.inference_mode():
            logits = self.forward(batch).float()  # [sum 2 T_i, C, V]
            offset = 0
            for i in range(B):
                c_len, t_len = batch.cond_lens[i], batch.target_lens[i]
                cond = logits[offset:offset + t_len].transpose(0, 1)  # [C, T, V]
                uncond = logits[offset + t_len:offset + 2 * t_len].transpose(0, 1)
                offset += 2 * t_len
                k = self.schedules[i][step]
                if k <= 0:
                    continue
                score_and_update(cond, uncond, self.tokens[i], k, self.cfg, self.mask_id, self.generators[i])
                batch.input_ids[i, :, c_len - t_len:c_len] = self.tokens[i]
                batch.input_ids[B + i, :, :t_len] = self.tokens[i]
        self.done += 1


def generate_tokens(lm: torch.nn.Module, prompts: list[PromptItem], cfg: GenerationConfig,
                    generator: torch.Generator | list[torch.Generator], *,
                    on_step: Callable[[int], None] | None = None) -> list[torch.Tensor]:
    """Generate the target tokens of every prompt together: one LongTensor [C, T_i] per prompt (`EagerGeneration`'s
    generator); on_step(step) is called before each step (raise from it to cancel).
    """
    generation = EagerGeneration(lm, prompts, cfg, generator)
    for step in range(cfg.num_step):
        if on_step is not None:
            on_step(step)
        generation.step()
    return generation.tokens
