"""Counter-based random numbers for the graph runner: each target slot's uniform is a hash of its
sequence's key, the step, its codebook and its frame (and the class, for class sampling).

A sequence's noise therefore does not depend on which other sequences share its forward or where in
the packed rows it sits: a batched generation gives each sequence exactly the tokens it gets alone,
and a seed reproduces a take on any batch. The hash is integer-only tensor code on static shapes,
so it runs inside a CUDA graph with the step read from a device counter. The eager reference loop
(engine/lm/decode.py) keeps torch.Generator, drawn in upstream's order.
"""
from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
MAX_FRAMES = 4096  # frames of one sequence the counter tells apart (60 s is 1500)
_GOLDEN = 0x9E3779B9


def _mul32(x: torch.Tensor | int, m: int) -> torch.Tensor | int:
    """x * m mod 2**32 for int64 x in [0, 2**32), without overflowing int64 (16-bit halves)."""
    low = (x & 0xFFFF) * m
    high = ((x >> 16) * m) & 0xFFFF
    return (low + (high << 16)) & MASK32


def mix32(x: torch.Tensor | int) -> torch.Tensor | int:
    """A 32-bit integer hash (Wellons' lowbias32) of int64 values in [0, 2**32): a tensor's on its device, or one
    Python int's (the same value, without a tensor's per-operation cost on the host)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def sequence_key(seed: int) -> int:
    """The 32-bit key of a sequence seeded `seed` (any Python int: both halves count)."""
    low, high = seed & MASK32, (seed >> 32) & MASK32
    return mix32(low ^ mix32((high + _GOLDEN) & MASK32))  # on ints: one-element tensors cost 0.2 ms a sequence


def to_uniform(bits: torch.Tensor) -> torch.Tensor:
    """24 hash bits -> fp32 uniforms in [0, 1)."""
    return (bits >> 8).to(torch.float32) * (1.0 / (1 << 24))


def slot_bits(keys: torch.Tensor, frames: torch.Tensor, step: torch.Tensor, num_codebooks: int) -> torch.Tensor:
    """[C, H] hashes of every slot at `step`: keys/frames [H] (the slot's sequence key and its frame in
    that sequence), step a [1] or [] long tensor (read on the device)."""
    codebook = torch.arange(num_codebooks, device=keys.device).view(-1, 1)  # [C, 1]
    counter = (step.view(1, 1) * num_codebooks + codebook) * MAX_FRAMES + frames.view(1, -1)  # [C, H]
    return mix32(mix32(keys.view(1, -1) ^ counter))


def position_uniforms(keys, frames, step, num_codebooks: int) -> torch.Tensor:
    """[C, H] uniforms for the position (reveal-order) noise."""
    return to_uniform(slot_bits(keys, frames, step, num_codebooks))


def class_uniforms(keys, frames, step, num_codebooks: int, num_classes: int) -> torch.Tensor:
    """[C, H, V] uniforms for the class-sampling noise: a second stream, one value per class."""
    slot = slot_bits(keys ^ _GOLDEN, frames, step, num_codebooks)  # [C, H], apart from the position stream
    classes = torch.arange(num_classes, device=keys.device).view(1, 1, -1)  # [1, 1, V]
    return to_uniform(mix32(slot.unsqueeze(-1) ^ _mul32(classes, _GOLDEN)))
