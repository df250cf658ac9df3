"""The fidelity measures of two renders (engine/checks/fidelity.py) on inputs whose answer is known by hand."""
import math

import numpy as np
import pytest
import torch

from engine.checks.fidelity import mel_distance_db, token_agreement


def test_token_agreement_counts_the_slots_that_match():
    reference = torch.randint(0, 1024, (8, 10), generator=torch.Generator().manual_seed(0))
    tokens = reference.clone()
    tokens[:2] = (tokens[:2] + 1) % 1024  # 20 of 80 slots differ
    assert token_agreement(tokens, reference) == 0.75
    with pytest.raises(ValueError, match="token shapes differ"):
        token_agreement(tokens[:, :9], reference)


def test_mel_distance_of_a_louder_copy_is_its_gain_in_db():
    noise = np.random.default_rng(3).standard_normal(24000).astype(np.float32) * 0.1  # no silent mel bin
    assert mel_distance_db(noise, noise, 24000) == 0.0
    assert mel_distance_db(2 * noise, noise, 24000) == pytest.approx(20 * math.log10(2), rel=1e-4)
    with pytest.raises(ValueError, match="too short"):
        mel_distance_db(noise[:1000], noise, 24000)


def test_mel_distance_is_symmetric_and_over_the_common_length():
    """A louder and a quieter copy are equally far (the differences are absolute: bands louder in one clip and
    softer in the other do not cancel); clips of different lengths are compared over the shorter one, which
    may be exactly one FFT window long."""
    noise = np.random.default_rng(4).standard_normal(24000).astype(np.float32) * 0.1
    assert mel_distance_db(noise, 2 * noise, 24000) == pytest.approx(20 * math.log10(2), rel=1e-4)
    longer = np.concatenate([noise, np.ones(5000, np.float32)])
    assert mel_distance_db(longer, noise, 24000) == 0.0 and mel_distance_db(noise, longer, 24000) == 0.0
    assert mel_distance_db(noise[:1024], longer, 24000) == 0.0
    with pytest.raises(ValueError, match="too short"):
        mel_distance_db(noise[:1023], longer, 24000)
