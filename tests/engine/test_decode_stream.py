"""Decodes on a stream of their own (engine/decode_stream.py): behind the work that made their codes, not behind what
other calls queued since. The GPU tests keep the device busy with spin kernels (device_busy.py)."""
import numpy as np
import pytest
import torch
from device_busy import keep_busy, returned_while_the_device_was_busy

from engine.constants import DEMO_MODEL
from engine.decode_stream import DecodeStream
from engine.device_span import DeviceSpan

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="the device's queue: needs a GPU")


def test_off_cuda_the_block_runs_as_it_is():
    made = DeviceSpan(torch.device("cpu"))
    made.end()
    with DecodeStream(torch.device("cpu")).after(made):
        assert torch.ones(2).sum().item() == 2.0


def test_a_span_is_waited_for_only_once_it_has_ended():
    made = DeviceSpan(torch.device("cpu"))
    with pytest.raises(RuntimeError, match="before end"):
        made.wait_in(None)


@gpu
def test_the_decode_stream_waits_for_the_work_that_made_the_codes():
    device = torch.device("cuda")
    decoding = DecodeStream(device)  # before the busy device: a process's first stream waited for it (H100)
    torch.cuda.synchronize()
    made = DeviceSpan(device)
    busy = keep_busy()  # the steps that make the codes
    made.end()
    with decoding.after(made):
        done = torch.cuda.Event()
        done.record()
    assert not done.query()  # behind the spins
    done.synchronize()
    assert busy.query()


@gpu
def test_the_decode_stream_does_not_wait_for_work_queued_after_that():
    device = torch.device("cuda")
    decoding = DecodeStream(device)
    torch.cuda.synchronize()
    made = DeviceSpan(device)
    made.end()

    def decode():
        with decoding.after(made):
            done = torch.cuda.Event()
            done.record()
        done.synchronize()
    assert returned_while_the_device_was_busy(decode)  # later steps of other calls


@pytest.fixture(scope="module")
def engine():
    from engine.engine import Engine

    return Engine.load(DEMO_MODEL, device="cuda", mode="eager")


@gpu
def test_an_engines_decode_is_read_back_while_later_steps_still_run(engine):
    """Engine._decode_pieces queues on the decode stream: it reads its waves back (waits for them) while the spins
    queued after the codes' span, as a running batch's later steps, still run."""
    g = torch.Generator().manual_seed(5)
    pieces = [torch.randint(0, engine.codec.codebook_size, (8, 40), generator=g).to(engine.device)]
    made = DeviceSpan(engine.device)
    made.end()
    alone = engine._decode_pieces(pieces, after=made)  # first: CUDA loads its kernels (a load waits for the device)
    out = []
    assert returned_while_the_device_was_busy(lambda: out.extend(engine._decode_pieces(pieces, after=made)))
    np.testing.assert_array_equal(out[0], alone[0])
