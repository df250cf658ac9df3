"""The graph runner's tokens for prompts packed together from their first step, run `num_step` steps: the reference
the running batch (engine/lm/continuous.py) and the reference loop (engine/lm/decode.py) are compared with. Built from
the runner's public pieces only (pack, load, replay): none of ContinuousBatch's joins, re-packs and read-out, which
the comparisons check, so a bug there cannot hide in the reference too."""
import torch

from engine.config import GenerationConfig
from engine.lm.decode import unmask_schedule
from engine.lm.prompt import PromptItem
from engine.lm.runner import StaticRunner, pack, packed_rows


def runner_tokens(runner: StaticRunner, prompts: list[PromptItem], cfg: GenerationConfig,
                  seeds: list[int]) -> list[torch.Tensor]:
    """Tokens [C, T_j] of each prompt, all in one forward per step; prompt j's noise is keyed by seeds[j]."""
    C = runner.lm.cfg.num_codebooks
    S = runner.bucket_for(sum(packed_rows(p) for p in prompts))
    assert S is not None, f"{len(prompts)} sequences exceed the largest bucket ({max(runner.buckets)} rows)"
    schedules = [unmask_schedule(p.target_len, C, cfg.num_step, cfg.t_shift) for p in prompts]
    with torch.inference_mode():
        entry = runner.load(pack(prompts, S, runner.lm.cfg.audio_mask_id, schedules, seeds), cfg)
        for _ in range(cfg.num_step):
            runner.replay(entry, cfg)
        tokens, out, slot = entry.buffers.tokens.clone(), [], 0
        for p in prompts:
            out.append(tokens[:, slot:slot + p.target_len])
            slot += p.target_len
        return out
