"""How long queued device work took, measured without making the host wait for it to be done."""
from __future__ import annotations

import time

import torch


class DeviceSpan:
    """The span from its making to `end()` of the work queued in between.

    On CUDA two events recorded on the device's current stream bound it, so neither end blocks the host: work queued
    after `end()` (e.g. a decode behind the generation that makes its codes) is launched while the device still runs
    what came before. `seconds()` waits for the end and gives the device's time from reaching the start to
    reaching the end. Off CUDA the work ran as it was called: the host's clock between the two calls. The
    device's stream, not `Event.record()`'s default (the calling thread's current device's): for an engine on cuda:1
    in a thread whose current device is cuda:0, that stream holds none of the work.
    """

    def __init__(self, device: torch.device):
        self._device = device
        self._events = None
        if device.type == "cuda":
            self._events = [torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)]
            self._events[0].record(torch.cuda.current_stream(device))
        self._start = time.perf_counter()
        self._end: float | None = None

    def end(self) -> None:
        if self._events is not None:
            self._events[1].record(torch.cuda.current_stream(self._device))
        self._end = time.perf_counter()

    def seconds(self) -> float:
        if self._end is None:
            raise RuntimeError("DeviceSpan.seconds() before end()")
        if self._events is None:
            return self._end - self._start
        self._events[1].synchronize()
        return self._events[0].elapsed_time(self._events[1]) / 1000
