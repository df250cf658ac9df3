"""engine/lm/batch.py's JoiningGeneration (CPU, the runner's static algorithm): a plan whose later chunks take chunk 0
as their reference gets them after chunk 0, each item its lone tokens, whether chunk 0 runs in the batch or, too large
for every bucket, eagerly; a caller joining later gets its own lone tokens too. Chunk 0's tokens reach the later
chunks' prompts (the engine's) without a read to the host: on a GPU it would wait for every step queued."""
import pytest
import torch
from runner_reference import runner_tokens
from test_batch import CFG

from engine.lm.batch import JoiningGeneration, item_seed
from engine.lm.decode import EagerGeneration, generate_tokens
from engine.lm.plan import Plan, PlanItem
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner

TEXTS = [("The first chunk.", 10), ("The second chunk, a little longer.", 14), ("The third.", 7)]
HOST_READS = {torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item}


class OnTheDevice(torch.Tensor):
    """Tokens as a GPU's batch hands them out: reading them to the host there waits for every step queued before them
    (the running batch's other members stall), so here any such read fails."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        to_host = func is torch.Tensor.to and any(
            isinstance(a, str | torch.device) and torch.device(a).type == "cpu" for a in (*args[1:], *kwargs.values()))
        if func in HOST_READS or to_host:
            raise AssertionError(f"{func.__name__}: a generated chunk's tokens read to the host while driving")
        return super().__torch_function__(func, types, args, kwargs)


def _plan(chunk0_is_reference: bool) -> Plan:
    items = [PlanItem(text, T, TEXTS[0][0] if chunk0_is_reference and i else None, None)
             for i, (text, T) in enumerate(TEXTS)]
    return Plan(items, "en", None, False, chunk0_is_reference)


def _host_prompt_of(engine):
    """The reference's prompts: chunk 0's tokens inline on the host, as a clip's."""
    def prompt_of(plan, i, chunk0):
        item = plan.items[i]
        return build_prompt(engine.tokenizer, engine.lm.cfg, item.text, item.target_len, ref_text=item.ref_text,
                            ref_tokens=chunk0, language=plan.language, instruct=plan.instruct, denoise=plan.denoise)
    return prompt_of


def _run(joining: JoiningGeneration, joins: dict[int, tuple], stops: dict[int, str] | None = None) -> dict:
    """Step `joining` until it is idle, adding joins[g] and stopping the caller stops[g] before step g: {caller: (tokens
    per plan, the step at which they came)}."""
    got = {}
    for step in range(100):  # bounded: a caller never handed out fails instead of hanging
        for caller, plans, seeds in [joins[step]] if step in joins else []:
            joining.add(caller, plans, seeds)
        if step in (stops or {}):
            joining.stop(stops[step])
        if joining.idle and step > max(joins):
            return got
        got.update((caller, (tokens, step)) for caller, tokens in joining.step())
    raise AssertionError(f"still running: {list(joining.jobs)}")


def _alone(lm, runner, prompt, seed):
    """Its lone tokens: the runner's, or eagerly where no bucket holds it."""
    if runner.fits(prompt):
        return runner_tokens(runner, [prompt], CFG, [seed])[0]
    return generate_tokens(lm, [prompt], CFG, [torch.Generator().manual_seed(seed)])[0]


@pytest.mark.parametrize("buckets", [(128, 256, 512), (16,), (48,)],
                         ids=["in the batch", "too large: eagerly", "chunk 0 in the batch, the later ones beside it"])
def test_later_chunks_follow_chunk_0_and_each_item_gets_its_lone_tokens(engine, buckets, monkeypatch):
    done = JoiningGeneration._done  # where every item's tokens land, and chunk 0's go on to the later chunks
    monkeypatch.setattr(JoiningGeneration, "_done", lambda self, job, j, i, tokens:
                        done(self, job, j, i, tokens.as_subclass(OnTheDevice)))
    lm, host_prompt_of = engine.lm, _host_prompt_of(engine)
    runner = StaticRunner(lm, buckets=buckets)
    joining = JoiningGeneration(runner, torch.device("cpu"), CFG, engine._prompt)
    referenced, plain = _plan(True), _plan(False)
    got = _run(joining, {0: ("referenced", [referenced], [7]), 2: ("plain", [plain], [8])})
    chunk0 = got["referenced"][0][0][0].as_subclass(torch.Tensor)
    assert torch.equal(chunk0, _alone(lm, runner, host_prompt_of(referenced, 0, None), item_seed(7, 0)))
    for i in (1, 2):
        want = _alone(lm, runner, host_prompt_of(referenced, i, chunk0), item_seed(7, i))
        assert torch.equal(got["referenced"][0][0][i], want)
    for i in range(3):
        assert torch.equal(got["plain"][0][0][i], _alone(lm, runner, host_prompt_of(plain, i, None), item_seed(8, i)))
    assert got["referenced"][1] == 2 * CFG.num_step - 1  # chunk 0's steps, then the later chunks'


BIG = Plan([PlanItem("A chunk far too long for the one bucket there is.", 100, None, None)], "en", None, False, False)


@pytest.fixture
def eager_steps(monkeypatch) -> list[int]:
    """The steps the items beside the batch took, each as its own step count before it."""
    steps, step = [], EagerGeneration.step
    monkeypatch.setattr(EagerGeneration, "step", lambda self: steps.append(self.done) or step(self))
    return steps


def test_an_item_too_large_for_every_bucket_takes_a_step_at_each_step_of_the_batch(engine, eager_steps):
    """It runs beside the batch, one step at each of the batch's: it and the members beside it are handed out at
    their last steps, each with its lone tokens."""
    lm, host_prompt_of = engine.lm, _host_prompt_of(engine)
    runner = StaticRunner(lm, buckets=(192,))
    plain = _plan(False)
    assert not runner.fits(host_prompt_of(BIG, 0, None)) and all(runner.fits(host_prompt_of(plain, i, None))
                                                                  for i in range(3))
    joining = JoiningGeneration(runner, torch.device("cpu"), CFG, engine._prompt)
    got = _run(joining, {0: ("big", [BIG], [5]), 1: ("plain", [plain], [8])})
    assert got["big"][1] == CFG.num_step - 1 and got["plain"][1] == CFG.num_step  # each at its own last step
    assert eager_steps == list(range(CFG.num_step))
    assert torch.equal(got["big"][0][0][0], _alone(lm, runner, host_prompt_of(BIG, 0, None), item_seed(5, 0)))
    for i in range(3):
        assert torch.equal(got["plain"][0][0][i], _alone(lm, runner, host_prompt_of(plain, i, None), item_seed(8, i)))


def test_an_item_too_large_for_every_bucket_stops_at_the_next_step_boundary(engine, eager_steps):
    """Stopped before step 2, it takes no step more; the members beside it keep their lone tokens."""
    lm, host_prompt_of = engine.lm, _host_prompt_of(engine)
    runner = StaticRunner(lm, buckets=(192,))
    plain = _plan(False)
    joining = JoiningGeneration(runner, torch.device("cpu"), CFG, engine._prompt)
    got = _run(joining, {0: ("big", [BIG], [5]), 1: ("plain", [plain], [8])}, stops={2: "big"})
    assert eager_steps == [0, 1] and "big" not in got
    for i in range(3):
        assert torch.equal(got["plain"][0][0][i], _alone(lm, runner, host_prompt_of(plain, i, None), item_seed(8, i)))
