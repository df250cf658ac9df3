"""The host runs ahead of the device: loading a packed layout into a bucket (StaticRunner.load) and a running batch's
step with a join (its re-pack) return while the work queued before them still runs. CUDA may make a copy from
pageable host memory wait for its stream: on an H100 a 4096-row pageable load waited, so the runner pins its sources
(the load test failed with the pin planted away); and CUDA loads a kernel on its first launch, a load that waits for
the device, so the first join of a process waited until the runner ran the re-pack's kernels at capture (the join
test failed on an H200 with a one-slot warm-up only; tools/repack_host_wait.py, BENCHMARKS.md 2026-12-06). The device is
kept busy for seconds against the host's milliseconds, by short spin kernels (one kernel of seconds would trip a
display GPU's watchdog). GPU only: a CPU runner has no queue."""
import pytest
import torch

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.continuous import ContinuousBatch
from engine.lm.decode import unmask_schedule
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner, pack, packed_rows

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the device's queue: needs a GPU")
CFG = GenerationConfig(position_temperature=0.0, num_step=4)
BUCKET = 4096  # its ids alone are 256 KiB, twice the 2048-row pack's, whose pageable load did not wait
SPINS, SPIN_CYCLES = 64, 1 << 27  # 64 kernels of 2^27 clocks: each 0.1 s at 1.3 GHz, together seconds at any clock


@pytest.fixture(scope="module")
def runner():
    lm = load_lm(DEMO_MODEL, "cuda").use_fused_kernels()
    runner = StaticRunner(lm, buckets=(BUCKET,), fused=True)
    runner.capture(CFG)
    # PyTorch's pinned cache grows on first use, and allocating pinned memory may wait for the device: a process pays
    # that once per block size; the tests below ask for the steady state, so one load fills the cache first
    with torch.inference_mode():
        runner.load(_packed(runner, _prompts(runner, 2)), CFG)
        torch.cuda.synchronize()
    return runner


def _prompts(runner, count: int) -> list:
    tokenizer, cfg = load_text_tokenizer(DEMO_MODEL), runner.lm.cfg
    ref = torch.randint(0, 1024, (cfg.num_codebooks, 400), generator=torch.Generator().manual_seed(1))
    return [build_prompt(tokenizer, cfg, f"Sentence number {k} of a few.", 500, ref_text="Words.", ref_tokens=ref,
                         language="en") for k in range(count)]


def _packed(runner, prompts: list):
    C = runner.lm.cfg.num_codebooks
    schedules = [unmask_schedule(p.target_len, C, CFG.num_step, CFG.t_shift) for p in prompts]
    return pack(prompts, BUCKET, runner.lm.cfg.audio_mask_id, schedules, list(range(len(prompts))))


def _returned_while_the_device_was_busy(action) -> bool:
    torch.cuda.synchronize()
    for _ in range(SPINS):
        torch.cuda._sleep(SPIN_CYCLES)
    busy = torch.cuda.Event()
    busy.record()
    action()
    returned_first = not busy.query()
    torch.cuda.synchronize()
    return returned_first


def test_load_of_a_large_bucket_returns_while_the_device_is_busy(runner):
    prompts = _prompts(runner, 2)
    assert sum(packed_rows(p) for p in prompts) > BUCKET // 2
    packed = _packed(runner, prompts)
    with torch.inference_mode():
        assert _returned_while_the_device_was_busy(lambda: runner.load(packed, CFG))


def test_a_join_step_returns_while_the_device_is_busy(runner):
    first, second = _prompts(runner, 2)
    batch = ContinuousBatch(runner, CFG)
    batch.add(first, 0)
    batch.step()  # first alone: the join below re-packs it with the second

    def join():
        batch.add(second, 1)
        batch.step()
    assert _returned_while_the_device_was_busy(join)
    assert [s.done for s in batch.members] == [2, 1]
