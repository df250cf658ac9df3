"""The bench's fidelity measures (tools/fidelity.py) on inputs whose answer is known by hand: on the CPU
the bench can only compare the fp32 path with itself, where every measure is trivially perfect."""
import math

import numpy as np
import pytest
import torch

from tools.fidelity import logits_cosine, mel_distance_db, sqnr_db, step0_argmax_agreement, token_agreement


def test_token_agreement_counts_the_slots_that_match():
    reference = torch.randint(0, 1024, (8, 10), generator=torch.Generator().manual_seed(0))
    tokens = reference.clone()
    tokens[:2] = (tokens[:2] + 1) % 1024  # 20 of 80 slots differ
    assert token_agreement(tokens, reference) == 0.75
    with pytest.raises(ValueError, match="token shapes differ"):
        token_agreement(tokens[:, :9], reference)


def test_step0_agreement_counts_argmax_flips_and_never_the_mask():
    g = torch.Generator().manual_seed(1)
    reference = torch.randn(2, 8, 6, 1025, generator=g)  # (cond, uncond), codebooks, frames, vocabulary
    flipped = reference.clone()
    best = step0_argmax_reference(reference)[3, 4]
    flipped[:, 3, 4, (best + 1) % 1024] += 100.0  # one slot's winner changes, in both rows alike
    assert step0_argmax_agreement(flipped, reference) == pytest.approx(1 - 1 / 48)
    masked = reference.clone()
    masked[:, 0, 0, 1024] += 100.0  # the MASK id is never a prediction
    assert step0_argmax_agreement(masked, reference) == 1.0


def step0_argmax_reference(logits: torch.Tensor, guidance: float = 2.0) -> torch.Tensor:
    """The guided argmax written out in float64 from the formula (upstream's CFG in log-probabilities)."""
    c, u = torch.log_softmax(logits[0].double(), -1), torch.log_softmax(logits[1].double(), -1)
    guided = torch.log_softmax(c + guidance * (c - u), -1)
    guided[..., 1024] = -math.inf
    return guided.argmax(-1)


def test_logits_cosine_of_known_angles():
    a = torch.randn(2, 8, 5, 16, generator=torch.Generator().manual_seed(2))
    assert logits_cosine(3 * a, a) == pytest.approx(1.0, abs=1e-12)
    assert logits_cosine(-a, a) == pytest.approx(-1.0, abs=1e-12)
    x, y = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 2.0, 0.0])
    assert logits_cosine(x, y) == 0.0 and logits_cosine(x + y, x) == pytest.approx(1 / math.sqrt(5))


def test_mel_distance_of_a_louder_copy_is_its_gain_in_db():
    noise = np.random.default_rng(3).standard_normal(24000).astype(np.float32) * 0.1  # no silent mel bin
    assert mel_distance_db(noise, noise, 24000) == 0.0
    assert mel_distance_db(2 * noise, noise, 24000) == pytest.approx(20 * math.log10(2), rel=1e-4)
    with pytest.raises(ValueError, match="too short"):
        mel_distance_db(noise[:1000], noise, 24000)


def test_sqnr_of_a_known_error():
    ref = torch.randn(1000, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert sqnr_db(ref, 1.1 * ref) == pytest.approx(20.0, abs=1e-9)  # error 0.1 x the signal: 20 dB
