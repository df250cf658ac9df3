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


class _RecordedEvent:
    """A step's event that records when the host waits on it."""

    def __init__(self, step: int, waited: list[int]):
        self.step, self._waited = step, waited

    def synchronize(self) -> None:
        self._waited.append(self.step)


@pytest.mark.parametrize("ahead, queued", [(2, 5), (2, 2), (2, 3), (0, 1)])
def test_catch_up_waits_on_the_oldest_steps_until_ahead_are_left(ahead, queued):
    """The bound on the host alone (any machine): with `queued` steps unfinished, the host waits on the oldest
    `queued - ahead` in order and leaves exactly `ahead` (none when as many as `ahead` are queued)."""
    queue, waited = StepQueue(torch.device("cuda")), []
    queue._events.extend(_RecordedEvent(step, waited) for step in range(queued))
    queue.catch_up(ahead)
    assert waited == list(range(max(queued - ahead, 0)))
    assert [event.step for event in queue._events] == list(range(max(queued - ahead, 0), queued))


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
