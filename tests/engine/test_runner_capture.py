"""A lazy CUDA-graph capture of the static runner while another thread makes the CUDA calls the engine makes
outside its lock: an audio readback's event sync, a voice's tokens.cpu(), a check's small model, a pinned
buffer. The runner captures in thread_local mode, so neither side fails and the graph replays the reference
tokens (in the default global mode each of these calls fails and invalidates the capture:
tools/capture_overlap.py, BENCHMARKS.md). GPU only: a CPU runner never captures."""
import threading

import pytest
import torch
from runner_reference import runner_tokens

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import generate_tokens
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="captures CUDA graphs: needs a GPU")
TIMEOUT_S = 120
CFG = GenerationConfig(position_temperature=0.0, num_step=4)


def _event_synchronize(ctx):
    event = torch.cuda.Event()
    event.record()
    event.synchronize()


def _tensor_cpu(ctx):
    ctx["tokens"].cpu()


def _small_model(ctx):
    ctx["model"](ctx["x"]).sum().item()


def _pinned_buffer(ctx):
    torch.empty(1 << 16, pin_memory=True)


def _audio_readback(ctx):
    """What engine/codec.py's queue_decode and QueuedDecode.waves do: a non-blocking copy into a pinned buffer,
    an event recorded after it and waited for, then the buffer freed (back to PyTorch's pinned cache)."""
    host = torch.empty(ctx["x"].shape, pin_memory=True)
    host.copy_(ctx["x"], non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    assert torch.equal(host, ctx["x"].cpu())
    del host


@pytest.mark.parametrize("other_thread", [_event_synchronize, _tensor_cpu, _small_model, _pinned_buffer,
                                          _audio_readback])
def test_a_capture_beside_another_threads_cuda_calls_replays_the_reference(other_thread):
    plain = load_lm(DEMO_MODEL, "cuda")
    fused = load_lm(DEMO_MODEL, "cuda").use_fused_kernels()
    ref = torch.randint(0, 1024, (8, 12), generator=torch.Generator().manual_seed(1))
    prompt = build_prompt(load_text_tokenizer(DEMO_MODEL), plain.cfg, "Hello there.", 8, ref_text="Words.",
                          ref_tokens=ref, language="en")
    want = generate_tokens(plain, [prompt], CFG, torch.Generator("cuda").manual_seed(0))[0]
    ctx = {"tokens": torch.arange(64, device="cuda"), "model": torch.nn.Linear(64, 64, device="cuda"),
           "x": torch.randn(8, 64, device="cuda")}
    go, done, errors = threading.Event(), threading.Event(), []

    def other():
        go.wait(TIMEOUT_S)
        try:
            other_thread(ctx)
        except Exception as error:  # noqa: BLE001 - reported by the test below
            errors.append(error)
        done.set()

    runner = StaticRunner(fused, buckets=(64,), fused=True)
    assert not runner.eager
    step = runner._step
    overlapped = []

    def step_while_the_other_thread_calls(*args, **kwargs):
        if torch.cuda.is_current_stream_capturing() and not overlapped:
            go.set()  # the other thread's call lands inside this capture
            assert done.wait(TIMEOUT_S)
            overlapped.append(True)
        return step(*args, **kwargs)

    runner._step = step_while_the_other_thread_calls
    thread = threading.Thread(target=other)
    thread.start()
    got = runner_tokens(runner, [prompt], CFG, [0])[0]
    thread.join(TIMEOUT_S)
    assert overlapped, "the other thread's call did not overlap a capture"
    assert errors == []
    assert torch.equal(got.cpu(), want.cpu())
