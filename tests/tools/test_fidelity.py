"""The bench's own fidelity measures (tools/fidelity.py) on inputs whose answer is known by hand: on the CPU
the bench can only compare the fp32 path with itself, where every measure is trivially perfect."""
import math

import pytest
import torch

from tools.fidelity import logits_cosine, sqnr_db, step0_argmax_agreement


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


def test_sqnr_of_a_known_error():
    ref = torch.randn(1000, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert sqnr_db(ref, 1.1 * ref) == pytest.approx(20.0, abs=1e-9)  # error 0.1 x the signal: 20 dB
