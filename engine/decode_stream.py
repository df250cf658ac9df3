"""Where an engine's codec decodes are queued: on CUDA, a stream of their own.

A running batch's runner queues step after step on the device's stream while its callers decode the tokens it
handed out (engine/gather.py: the host runs ahead of the device). A decode queued on that same stream waits for
every step queued before it, other calls' steps included: with 8 streaming clients starting together a first part's
decode took 3-38 ms against 2.7 ms alone (H200, BENCHMARKS.md 2026-12-06). On a stream of its own the decode waits
only for the steps that made its codes (their DeviceSpan's end) and runs beside the later ones; at a higher priority,
the device schedules its blocks first as the steps' kernels free their multiprocessors."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from engine.device_span import DeviceSpan

PRIORITY = -1  # CUDA: lower is higher; PyTorch maps it into the device's range


class DecodeStream:
    def __init__(self, device: torch.device):
        self.stream = torch.cuda.Stream(device, priority=PRIORITY) if device.type == "cuda" else None

    @contextlib.contextmanager
    def after(self, made: DeviceSpan) -> Iterator[None]:
        """Within the block, device work is queued on the decode stream, behind the end of `made` (the work that
        made what it reads) and nothing else; off CUDA the block runs as it is. Tensors made before it and read
        inside must stay referenced until the work queued here is done (a caller that reads it back does)."""
        if self.stream is None:
            yield
            return
        made.wait_in(self.stream)
        with torch.cuda.stream(self.stream):
            yield
