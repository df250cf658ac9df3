"""How far the host runs ahead of the device in a running batch, bounded: a call that joins starts behind the steps
queued so far, so the fewer there are, the sooner its first step runs.

CUDA-graph replays return before the device runs them, so a running batch's host loop queues step after step far ahead
of the device (H100, docs/bench/h100-issue23-clients-stagger15-20261206-1723.json: a stream arriving 15 ms after
another waited 34 ms behind its queued steps). `StepQueue.catch_up` keeps at most RUN_AHEAD of them unfinished: the
host waits on the event recorded after the oldest (the GIL released, the device's other work and the callers' decodes
untouched), outside the engine's lock, at the boundary before the joins."""
from __future__ import annotations

from collections import deque

import torch

# Steps queued ahead of the device at most: two keep it fed while the host prepares the next (a boundary costs the
# host well under a lone step's 1.3 ms of device time on an H100; a join's re-pack more, rarely)
RUN_AHEAD = 2


class StepQueue:
    """The steps a running batch queued on `device` that the host has not yet seen done, oldest first."""

    def __init__(self, device: torch.device):
        self._device = device
        self._events: deque[torch.cuda.Event] = deque()

    def queued(self) -> None:
        """A step was queued: on CUDA, an event recorded after it on the device's stream (off CUDA it has run)."""
        if self._device.type == "cuda":
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self._device))
            self._events.append(event)

    def catch_up(self, ahead: int = RUN_AHEAD) -> None:
        """Wait until at most `ahead` of the steps queued are unfinished on the device."""
        while len(self._events) > ahead:
            self._events.popleft().synchronize()
