"""The runner's noise keys (engine/lm/noise.py): a seed's key is the same value on the host as the device's hash."""
import torch

from engine.lm.noise import MASK32, mix32, sequence_key

# Recorded from sequence_key as it hashed one-element tensors (before 2026-12-06): a seed keeps its takes.
KEYS = {0: 2926543089, 1: 2692512407, 5: 1509349684, 12345: 4123179514, 2**31 - 2: 2141426523, 2**32 - 1: 1597890273,
        2**32: 587614100, 2**32 + 1: 2136536683, 2**40 + 5: 1124979530, 2**63 - 1: 2113004426, -1: 3394062164}


def test_sequence_keys_are_unchanged():
    assert {seed: sequence_key(seed) for seed in KEYS} == KEYS
    assert all(type(sequence_key(seed)) is int for seed in KEYS)


def test_mix32_of_an_int_equals_the_tensor_hash():
    values = torch.randint(0, 2**32, (4096,), generator=torch.Generator().manual_seed(0), dtype=torch.long)
    values = torch.cat([values, torch.tensor([0, 1, 0xFFFF, 0x10000, MASK32 - 1, MASK32])])
    assert [mix32(v) for v in values.tolist()] == mix32(values).tolist()
