"""The fused reveal (kernels/reveal.py) against the PyTorch ops the runner runs without it: the position
noise of engine/lm/noise.py to the log's rounding (the hash and its uniforms are integer-exact, so a
wrong bit of the hash moves the noise by far more), and the reveal itself exactly: the same tokens and
the same ids, ties, junk slots, sequences that straddle a program's block, a quota past the masked
slots. Interpreter at small shapes on a CPU; on a GPU also the baseline's grid."""
import pytest
import torch

from engine.lm.decode import gumbel_perturb
from engine.lm.noise import MAX_FRAMES, position_uniforms
from engine.lm.prompt import PromptItem
from engine.lm.runner import MAX_SEQUENCES, pack, reveal_mask
from kernels.reveal import noisy_scores, reveal

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # without CUDA, tests/conftest.py chose the interpreter
C, MASK = 8, 1024


def packed(frames: list[int], S: int, step: int, seed: int = 0):
    """Buffers of sequences with these target lengths (prompts of 3 rows), at `step`, on DEVICE, with
    random scores (few distinct values: many ties), predictions and some tokens revealed already."""
    g = torch.Generator().manual_seed(seed)
    prompts = [PromptItem(torch.randint(0, MASK, (C, 3 + T), generator=g), torch.ones(3 + T, dtype=torch.bool), T)
               for T in frames]
    schedules = [torch.randint(0, C * T // 2 + 1, (step + 1,), generator=g).tolist() for T in frames]
    buf = pack(prompts, S, MASK, schedules, seeds=[7 + j for j in range(len(frames))])
    buf.step.fill_(step)
    H = buf.tokens.shape[1]
    revealed = (torch.rand(C, H, generator=g) < 0.3) & buf.valid
    buf.tokens[revealed] = torch.randint(0, MASK, (int(revealed.sum()),), generator=g)
    buf.ids[0].index_copy_(1, buf.cond_cols, buf.tokens)
    buf.ids[0].index_copy_(1, buf.uncond_cols, buf.tokens)
    scores = torch.randint(-6, 6, (C, H), generator=g).float() / 4  # ties within and across sequences
    predicted = torch.randint(0, MASK, (C, H), generator=g)
    to = {f: getattr(buf, f).to(DEVICE) for f in buf.__dataclass_fields__}
    return type(buf)(**to), scores.to(DEVICE), predicted.to(DEVICE)


def noise_ref(buf, scores, temperature):
    """The runner's PyTorch path: Gumbel noise from engine/lm/noise.py, revealed and junk slots -inf."""
    if temperature > 0:
        u = position_uniforms(buf.slot_key, buf.slot_frame, buf.step, C)
        scores = gumbel_perturb(scores, temperature, None, u)
    return scores.masked_fill(buf.tokens != MASK, float("-inf")).masked_fill(~buf.valid, float("-inf"))


def kernel_noise(buf, scores, temperature):
    return noisy_scores(scores, buf.tokens, buf.valid, slot_key=buf.slot_key, slot_frame=buf.slot_frame,
                        step=buf.step, temperature=temperature, mask_id=MASK, max_frames=MAX_FRAMES)


def reveal_both(buf, noisy, predicted):
    """(tokens, ids) after the PyTorch reveal and after the kernel's, from the same priorities."""
    want_tokens = torch.where(reveal_mask(noisy, buf), predicted, buf.tokens)
    want_ids = buf.ids.clone()
    want_ids[0].index_copy_(1, buf.cond_cols, want_tokens)
    want_ids[0].index_copy_(1, buf.uncond_cols, want_tokens)
    tokens, ids = buf.tokens.clone(), buf.ids.clone()
    reveal(noisy, predicted, tokens=tokens, ids=ids[0], cond_cols=buf.cond_cols, uncond_cols=buf.uncond_cols,
           sequence_slots=buf.sequence_slots,
           schedule=buf.schedule, step=buf.step)
    return (want_tokens, want_ids), (tokens, ids)


LAYOUTS = {  # target lengths, bucket rows
    "one sequence, odd": ([17], 48),
    "three straddling blocks of 64": ([50, 1, 70], 320),
    "one frame": ([1], 8),
    "a sequence past one tile of frames": ([530, 40], 1300),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("step", [0, 5])
@pytest.mark.parametrize("temperature", [0.0, 5.0])  # many ties; all apart (the threshold itself decides)
def test_reveal_is_the_stable_sort_per_sequence(layout, step, temperature):
    frames, S = LAYOUTS[layout]
    buf, scores, predicted = packed(frames, S, step)
    noisy = noise_ref(buf, scores, temperature=temperature)
    want, got = reveal_both(buf, noisy, predicted)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert not torch.equal(want[0], buf.tokens)  # something was revealed


def test_a_quota_past_the_masked_slots_reveals_as_the_sort_does():
    """-inf slots (revealed, junk) tie at the end of a sequence's run: a quota reaching them takes them
    in flat order, as the stable sort does; one past the sequence's slots takes them all."""
    buf, scores, predicted = packed([20, 9], 96, 2)
    buf.schedule[2, :2] = torch.tensor([C * 20 + 3, C * 9 - 1])  # past all of its slots; all but one
    noisy = noise_ref(buf, scores, temperature=0.0)
    want, got = reveal_both(buf, noisy, predicted)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    junk = buf.slot_sequence == MAX_SEQUENCES
    assert junk.any() and torch.equal(got[0][:, junk], buf.tokens[:, junk])  # junk slots never change


def test_signed_zeros_tie_as_in_the_sort():
    """-0.0 == 0.0: the sort keeps them in flat order, so must the kernel (whose order keys are bit patterns)."""
    buf, scores, predicted = packed([17], 48, 1)
    scores = torch.zeros_like(scores)
    scores[:, 1::2] = -0.0  # every other slot, so that either sign first would pick other slots
    buf.schedule[1, 0] = 9
    noisy = noise_ref(buf, scores, temperature=0.0)
    want, got = reveal_both(buf, noisy, predicted)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("temperature", [0.0, 5.0, 0.7])
def test_noise_is_the_counter_hash_of_noise_py(temperature):
    buf, scores, _ = packed([50, 1, 70], 320, 3)
    want, got = noise_ref(buf, scores, temperature), kernel_noise(buf, scores, temperature)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = torch.isfinite(want)
    # two logs and a division in fp32: a few ulps of the result, against O(1) for any other uniform
    assert torch.allclose(got[finite], want[finite], rtol=4e-6, atol=4e-6)
    if temperature > 0:  # every step and every sequence's key draws its own noise
        buf.step.add_(1)
        assert (kernel_noise(buf, scores, temperature)[finite] - got[finite]).abs().max() > 0.1


@pytest.mark.skipif(DEVICE == "cpu", reason="the baseline's grid is too slow to interpret")
def test_baseline_grid_on_the_gpu():
    """896 packed rows, one sequence of 290 frames, and a bucket of 32 sequences."""
    for frames, S in (([290], 896), ([60 + j for j in range(32)], 8192)):
        buf, scores, predicted = packed(frames, S, 4)
        noisy = noise_ref(buf, scores, temperature=5.0)
        want, got = reveal_both(buf, noisy, predicted)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def spread_scores(C: int, H: int, seed: int) -> torch.Tensor:
    """Priorities over many exponents, both signs, signed zeros, neighbouring floats and repeats: every bit of the
    order key decides somewhere. On DEVICE, beside `packed`'s buffers."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(C, H, generator=g) * torch.pow(10.0, torch.randint(-30, 30, (C, H), generator=g).float())
    x[:, 3::4] = x[:, :1]  # repeats of one value in each codebook
    x[:, 2::5] = torch.nextafter(x[:, 2::5], torch.tensor(float("inf")))  # one ulp from their neighbours' kind
    x[0, ::3], x[1, ::4] = 0.0, -0.0
    return x.to(DEVICE)


@pytest.mark.parametrize("seed", [0, 1])
def test_quotas_reveal_as_the_stable_sort(seed):
    """One sequence and a second one beside it, quotas from 0 to past all of its slots, on priorities that
    differ in every bit of their key (the reveal's digits) or tie exactly."""
    buf, _, predicted = packed([6, 4], 32, 1, seed=seed)
    scores = spread_scores(C, buf.tokens.shape[1], seed)
    noisy = noise_ref(buf, scores, temperature=0.0)
    for quota in [0, 1, 2, 3, 5, 8, 13, 21, 34, 46, 47, 48, 49, 50]:  # up to past all 48 of its slots
        buf.schedule[1, :2] = torch.tensor([quota, C * 4 - quota % (C * 4)])
        want, got = reveal_both(buf, noisy, predicted)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), quota


def test_ties_at_the_quota_across_codebooks_and_tiles():
    """All of a long sequence's slots share one priority but a few above it: the quota's place among the ties is
    their flat, codebook-major order, over codebooks and over the program's tiles of frames."""
    buf, _, predicted = packed([530, 3], 1300, 2)
    scores = torch.full_like(buf.tokens, 1.5, dtype=torch.float32)
    scores[3, 7], scores[5, 600 % scores.shape[1]] = 2.0, 3.0
    buf.tokens.fill_(MASK)
    for quota in (1, 2, 3, 531, C * 530 - 1):
        buf.schedule[2, :2] = torch.tensor([quota, 5])
        noisy = noise_ref(buf, scores.to(DEVICE), temperature=0.0)
        want, got = reveal_both(buf, noisy, predicted)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), quota


def reveal_grid(noisy: torch.Tensor, frames: list[int], quotas: list[int]):
    """The kernel's (tokens, ids) on a [books, H] grid of sequences of these frames (no junk slots, every slot
    masked, ids [books, 2H] with slot t at columns t and H + t), and those of each sequence's stable descending
    sort of its [books, T] slots, flat codebook-major, revealing its quota. All on DEVICE."""
    books, H = noisy.shape
    g = torch.Generator().manual_seed(3)
    predicted = torch.randint(0, MASK, (books, H), generator=g).to(DEVICE)
    tokens = torch.full((books, H), MASK, device=DEVICE)
    ids = torch.full((books, 2 * H), -1, device=DEVICE)
    slots = torch.tensor([0] + frames, device=DEVICE).cumsum(0)
    want = tokens.clone()
    for j, T in enumerate(frames):
        start = int(slots[j])
        order = noisy[:, start:start + T].flatten().argsort(descending=True, stable=True)[:quotas[j]]
        want[order // T, start + order % T] = predicted[order // T, start + order % T]
    columns = torch.arange(H, device=DEVICE)
    reveal(noisy, predicted, tokens=tokens, ids=ids, cond_cols=columns, uncond_cols=columns + H, sequence_slots=slots,
           schedule=torch.tensor([quotas], device=DEVICE), step=torch.tensor(0, device=DEVICE))
    return (tokens, ids), (want, torch.cat([want, want], dim=1))


def test_fifteen_codebooks_fill_a_frames_4_bit_counts():
    """15 codebooks, the most a frame's 4-bit digit count holds: all slots tied but two, so every frame counts 15 in
    one digit; each sequence reveals as the stable sort of its slots, ties in flat order."""
    frames = [40, 3]
    noisy = torch.full((15, sum(frames)), 0.5, device=DEVICE)
    noisy[4, 10], noisy[14, 41] = 2.0, 1.0
    for quota in (1, 2, 17, 15 * 40 - 1, 15 * 40):
        got, want = reveal_grid(noisy, frames, [quota, 15 * 3 - 1])
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), quota


def test_reveal_refuses_grids_its_counts_and_flat_keys_cannot_hold():
    """16 codebooks overflow a frame's 4-bit count; more than 2**18 slots, the 18-bit flat keys."""
    for books, H, match in ((16, 4, "4-bit"), (8, (1 << 15) + 1, "18 bits")):
        noisy = torch.zeros(books, H, device=DEVICE)
        with pytest.raises(ValueError, match=match):
            reveal_grid(noisy, [H], [1])


@pytest.mark.parametrize("name", ["cond_cols", "uncond_cols", "sequence_slots"])
def test_reveal_refuses_an_index_tensor_on_another_device(name):
    """Every tensor the kernel reads is on one device (a CPU index beside CUDA buffers is a bad address there, not a
    ValueError): one on the meta device is refused before the launch."""
    buf, scores, predicted = packed([5], 16, 0)
    args = {"cond_cols": buf.cond_cols, "uncond_cols": buf.uncond_cols, "sequence_slots": buf.sequence_slots}
    args[name] = args[name].to("meta")
    with pytest.raises(ValueError, match="different devices"):
        reveal(noise_ref(buf, scores, temperature=0.0), predicted, tokens=buf.tokens.clone(), ids=buf.ids[0].clone(),
               schedule=buf.schedule, step=buf.step, **args)
