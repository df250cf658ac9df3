"""engine/lm/run_ahead.py: the host waits until at most `ahead` of a batch's queued steps are unfinished on the device,
on the events recorded after them. Off CUDA a step has run when it returns: nothing to wait for."""
import pytest
import torch

from engine.lm.run_ahead import StepQueue

SPIN_CYCLES = 1 << 24  # a step's stand-in on the device


def test_off_cuda_nothing_is_waited_for():
    queue = StepQueue(torch.device("cpu"))
    for _ in range(3):
        queue.queued()
    queue.catch_up(0)
    assert not queue._events


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the device's queue: needs a GPU")
def test_catch_up_leaves_only_the_last_steps_unfinished():
    device = torch.device("cuda")
    queue = StepQueue(device)
    for _ in range(5):
        torch.cuda._sleep(SPIN_CYCLES)
        queue.queued()
    events = list(queue._events)
    queue.catch_up(2)
    assert all(event.query() for event in events[:3]) and queue._events == type(queue._events)(events[3:])
    queue.catch_up(0)
    assert all(event.query() for event in events) and not queue._events
