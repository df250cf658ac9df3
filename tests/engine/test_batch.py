"""Many sequences in one forward per step give each sequence the tokens it gets alone: the runner's
packed batch (its static algorithm on the CPU, and with the fused Triton kernels: on the GPU through its CUDA
graphs where there is one, else under the interpreter),
the eager reference loop's padded batch, and the Engine paths built on them (takes of one line,
sentences of one text, requests of different kinds).

Settings are the defaults' kind (position noise on): the runner's noise is keyed by each sequence's
seed, so even the random reveal order must match exactly."""
import pytest
import torch
from runner_reference import runner_tokens

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.batch import BatchedGeneration
from engine.lm.budget import MemoryBudget
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import generate_tokens
from engine.lm.model import KeyRanges
from engine.lm.plan import Plan, PlanItem
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner, pack, packed_rows

CFG = GenerationConfig(num_step=6)  # position_temperature 5: random reveal order
SAMPLED = CFG.replace(class_temperature=0.8)  # and random classes
GPU = "cuda" if torch.cuda.is_available() else "cpu"  # where the fused kernels run (the interpreter on a CPU)


@pytest.fixture(scope="module")
def lm_and_tokenizer():
    return load_lm(DEMO_MODEL, "cpu", torch.float32), load_text_tokenizer(DEMO_MODEL)


def _ref(frames: int, seed: int = 3) -> torch.Tensor:
    return torch.randint(0, 1024, (8, frames), generator=torch.Generator().manual_seed(seed))


def _prompt(lm, tok, text: str, target_len: int, ref: torch.Tensor | None = None, instruct: str | None = None):
    return build_prompt(tok, lm.cfg, text, target_len, ref_text="Some words here." if ref is not None else None,
                        ref_tokens=ref, language="en", instruct=instruct)


def _kinds(lm, tok):
    """Batches of each kind: sentences of one text (one voice), candidates of one line (one prompt, several
    seeds), requests that share nothing (a clone, a design, an automatic voice)."""
    ref = _ref(24)
    sentences = [_prompt(lm, tok, text, t, ref) for text, t in
                 [("The first sentence.", 14), ("And then a second, longer one follows it.", 27), ("End.", 6)]]
    line = _prompt(lm, tok, "One line, several takes.", 15, ref)
    requests = [_prompt(lm, tok, "A cloned voice speaks.", 12, _ref(30, seed=9)),
                _prompt(lm, tok, "A designed voice.", 17, instruct="female, low pitch"),
                _prompt(lm, tok, "Nobody chose this voice.", 9)]
    return {"sentences": (sentences, [11, 12, 13]), "candidates": ([line] * 4, [20, 21, 22, 23]),
            "requests": (requests, [5, 6, 7])}


KINDS = ("sentences", "candidates", "requests")


@pytest.mark.parametrize("kind,cfg", [(kind, CFG) for kind in KINDS] + [("requests", SAMPLED)],
                         ids=[*KINDS, "requests, class sampling"])
def test_runner_batch_equals_each_sequence_alone(lm_and_tokenizer, kind, cfg):
    lm, tok = lm_and_tokenizer
    prompts, seeds = _kinds(lm, tok)[kind]
    runner = StaticRunner(lm, buckets=(128, 256, 512))
    together = runner_tokens(runner, prompts, cfg, seeds)
    alone = [runner_tokens(runner, [p], cfg, [s])[0] for p, s in zip(prompts, seeds)]
    for got, want, p in zip(together, alone, prompts):
        assert got.shape == (8, p.target_len) and (got != lm.cfg.audio_mask_id).all()
        assert torch.equal(got, want)
    if kind == "candidates":
        assert not torch.equal(together[0], together[1])  # different seeds, different takes


def test_runner_batch_with_greedy_settings_is_the_reference_loop(lm_and_tokenizer):
    """Deterministic settings: the packed batch gives the eager reference loop's tokens, sequence by sequence."""
    lm, tok = lm_and_tokenizer
    prompts, seeds = _kinds(lm, tok)["requests"]
    cfg = CFG.replace(position_temperature=0.0)
    together = runner_tokens(StaticRunner(lm, buckets=(256,)), prompts, cfg, seeds)
    for got, p in zip(together, prompts):
        assert torch.equal(got, generate_tokens(lm, [p], cfg, torch.Generator())[0])


def test_fused_runner_batch_equals_each_sequence_alone(lm_and_tokenizer):
    """The GPU path's kernels (ragged attention over the packed sequences, fused scoring): compiled and
    replayed from CUDA graphs on a GPU, under Triton's interpreter on a CPU."""
    pytest.importorskip("triton")
    _, tok = lm_and_tokenizer
    fused = load_lm(DEMO_MODEL, GPU).use_fused_kernels()
    prompts = [_prompt(fused, tok, "Hi.", 5, _ref(6)), _prompt(fused, tok, "Hello.", 4)]
    seeds = [1, 2]
    runner = StaticRunner(fused, buckets=(48, 80), fused=True)
    assert runner.eager == (GPU == "cpu")
    cfg = CFG.replace(num_step=2)
    together = runner_tokens(runner, prompts, cfg, seeds)
    for got, p, s in zip(together, prompts, seeds):
        assert torch.equal(got, runner_tokens(runner, [p], cfg, [s])[0])


def test_eager_reference_batch_equals_each_alone(lm_and_tokenizer):
    """upstream's padded CFG batch with one generator per sequence: each sequence's draws are its own."""
    lm, tok = lm_and_tokenizer
    for kind in KINDS:
        prompts, seeds = _kinds(lm, tok)[kind]
        together = generate_tokens(lm, prompts, CFG, [torch.Generator().manual_seed(s) for s in seeds])
        for got, p, s in zip(together, prompts, seeds):
            assert torch.equal(got, generate_tokens(lm, [p], CFG, torch.Generator().manual_seed(s))[0])


def test_eager_waves_draw_each_plans_items_from_its_own_generator(lm_and_tokenizer):
    """The eager path's waves (item i of every plan that has one): a plan of one item beside a plan of two, the second
    plan alone in wave 1, still draws from its own generator there: each plan gets its lone tokens."""
    lm, tok = lm_and_tokenizer
    ref = _ref(24)
    short = Plan([PlanItem("One item only.", 9, "Some words here.", ref)], "en", None, False, False)
    long = Plan([PlanItem(text, T, "Some words here.", ref) for text, T in [("The first item.", 11), ("Then.", 6)]],
                "en", None, False, False)

    def prompt_of(plan, i, chunk0):
        item = plan.items[i]
        return build_prompt(tok, lm.cfg, item.text, item.target_len, ref_text=item.ref_text, ref_tokens=item.ref_tokens,
                            language=plan.language)

    cpu = torch.device("cpu")
    batched = BatchedGeneration(lm, MemoryBudget.for_device(cpu, lm.cfg, torch.float32), cpu)
    together = batched.plans([short, long], CFG, [5, 6], prompt_of, lambda step: None)
    for got, plan, seed in zip(together, [short, long], [5, 6]):
        alone = batched.plans([plan], CFG, [seed], prompt_of, lambda step: None)[0]
        assert len(got) == len(plan.items) and all(torch.equal(a, b) for a, b in zip(got, alone))


def test_packed_sequences_see_only_themselves(lm_and_tokenizer):
    """The layout: each sequence's prompt and uncond target are blocks of their own on the diagonal, its
    positions restart at 0, each slot points at its own rows and reveals its own schedule."""
    lm, tok = lm_and_tokenizer
    prompts, seeds = _kinds(lm, tok)["sentences"]
    S = 512
    schedules = [[2 * p.target_len, 6 * p.target_len] for p in prompts]
    buf = pack(prompts, S, 1024, schedules, seeds)
    allowed = KeyRanges(buf.key_start, buf.key_end).additive_mask(torch.float32)[0, 0] == 0  # [S, S]
    row = slot = 0
    for j, p in enumerate(prompts):
        c, T = p.ids.shape[1], p.target_len
        blocks = [(row, row + c), (row + c, row + c + T)]
        for lo, hi in blocks:
            assert allowed[lo:hi, lo:hi].all() and allowed[lo:hi].sum() == (hi - lo) ** 2  # nothing outside
        assert torch.equal(buf.positions[row:row + c], torch.arange(c))
        assert torch.equal(buf.positions[row + c:row + c + T], torch.arange(T))
        assert torch.equal(buf.cond_cols[slot:slot + T], torch.arange(row + c - T, row + c))
        assert torch.equal(buf.uncond_cols[slot:slot + T], torch.arange(row + c, row + c + T))
        assert (buf.slot_sequence[slot:slot + T] == j).all()
        assert buf.schedule[:2, j].tolist() == schedules[j]
        row, slot = row + c + T, slot + T
    assert row == sum(packed_rows(p) for p in prompts)
    assert not allowed[row:, :row].any() and not buf.valid[:, slot:].any()  # pads see only pads
