"""Fidelity measures between a mode's output and the fp32 reference path's output: those of one forward
(step-0 argmax agreement, logit cosine) and of a tensor (SQNR). Token agreement and mel distance are the
product's own (engine/checks/fidelity.py: the Realtime check uses them)."""
from __future__ import annotations

import torch


def step0_argmax_agreement(logits: torch.Tensor, reference: torch.Tensor, guidance_scale: float = 2.0,
                           mask_id: int = 1024) -> float:
    """Agreement of the first step's guided argmax [8, T] between two logit sets [2, 8, T, V]
    (cond, uncond). Unlike whole-token agreement this is not chaotic: it counts exactly the argmax
    flips caused by one forward's rounding, with identical inputs."""
    from engine.lm.decode import guided_log_probs

    def pick(x):
        x = x.double()
        return guided_log_probs(x[0], x[1], guidance_scale, mask_id).argmax(-1)
    return (pick(logits) == pick(reference)).double().mean().item()


def logits_cosine(logits: torch.Tensor, reference: torch.Tensor) -> float:
    """Cosine similarity of two logit tensors, flattened, computed in fp64."""
    a, b = logits.double().flatten().cpu(), reference.double().flatten().cpu()
    return (a @ b / (a.norm() * b.norm())).item()


def sqnr_db(ref: torch.Tensor, test: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio of `test` against `ref`, in dB (computed in fp64)."""
    ref64, test64 = ref.detach().double(), test.detach().double()
    noise = (ref64 - test64).pow(2).sum()
    return float(10 * torch.log10(ref64.pow(2).sum() / noise))
