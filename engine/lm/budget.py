"""How much memory a batch of sequences may take, and what a batch takes (an upper estimate).

The budget is a share of the GPU memory free once the model is loaded (on a CPU: a given number of
bytes). The graph runner's working memory is fixed when its buckets are captured, so the budget
decides which buckets exist; on the eager path every batch is cut to fit it. The estimates count
every activation a step keeps alive at its peak, from the model's shapes (on a GPU, tools/bench_batch.py
reports the largest bucket's estimate beside the allocator's peak; no test holds them to it).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.lm.prompt import PromptItem

FREE_SHARE = 0.5  # of the free GPU memory after loading: the codec, the checks' models and the app need the rest
CPU_BUDGET_BYTES = 8 * 2**30  # what a batch may take on a CPU (the eager path), unless given


def _row_bytes(cfg: ModelConfig, dtype_bytes: int) -> int:
    """Activations per row of one layer's step at its peak: the residual and its norm, q/k/v (k and v
    also expanded to the query heads), the attention output, the MLP's gate/up, its product and output."""
    q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    width = (4 * cfg.hidden_size + q_dim + 2 * kv_dim + 2 * q_dim + q_dim
             + 2 * cfg.intermediate_size + cfg.intermediate_size + cfg.hidden_size)
    return width * dtype_bytes


def _head_bytes(slots: int, cfg: ModelConfig) -> int:
    """The audio head's logits of `slots` cond + uncond target rows, and the fp32 scoring over them
    (log-softmax of each, the guided result, its copy)."""
    per_slot = cfg.num_codebooks * cfg.audio_vocab_size
    return 2 * slots * per_slot * (2 + 4 * 4)


@dataclass(frozen=True)
class MemoryBudget:
    bytes: int
    cfg: ModelConfig
    dtype_bytes: int

    @classmethod
    def for_device(cls, device: torch.device, cfg: ModelConfig, dtype: torch.dtype,
                   cpu_bytes: int = CPU_BUDGET_BYTES) -> MemoryBudget:
        """FREE_SHARE of the free memory on a GPU (call it after loading the weights), else `cpu_bytes`."""
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            budget = int(free * FREE_SHARE)
        else:
            budget = cpu_bytes
        return cls(budget, cfg, torch.tensor([], dtype=dtype).element_size())

    def eager_bytes(self, prompts: list[PromptItem]) -> int:
        """Peak of one step of the eager loop on these prompts: upstream's CFG batch (2B rows padded to the
        longest prompt), its [2B, heads, S, S] attention scores and probabilities (the math kernel's), the
        boolean mask, and the head on the target rows."""
        S, B2 = max(p.ids.shape[1] for p in prompts), 2 * len(prompts)
        cfg = self.cfg
        attention = B2 * S * S * (2 * cfg.num_heads * self.dtype_bytes + 1)
        heads = _head_bytes(sum(p.target_len for p in prompts), cfg)
        return B2 * S * _row_bytes(cfg, self.dtype_bytes) + attention + heads

    def runner_bytes(self, rows: int) -> int:
        """Peak of one captured step of a bucket of `rows` packed rows (H = rows // 2 target slots):
        ragged attention keeps no [S, S] tensor; the sort over the slots is small beside the head."""
        return rows * _row_bytes(self.cfg, self.dtype_bytes) + _head_bytes(rows // 2, self.cfg)

    def fits_eager(self, prompts: list[PromptItem]) -> bool:
        return self.eager_bytes(prompts) <= self.bytes

    def buckets(self, buckets: tuple[int, ...]) -> tuple[int, ...]:
        """The buckets whose step fits the budget (the smallest always: one short sequence must run)."""
        kept = tuple(b for b in buckets if self.runner_bytes(b) <= self.bytes)
        return kept or (min(buckets),)
