"""Whether host work returns while the device is busy with work queued before it (GPU only): the device is kept
busy for seconds against the host's milliseconds, by short spin kernels (one kernel of seconds would trip a display
GPU's watchdog)."""
from collections.abc import Callable

import torch

SPINS, SPIN_CYCLES = 64, 1 << 27  # 64 kernels of 2^27 clocks: each 0.1 s at 1.3 GHz, together seconds at any clock


def keep_busy() -> torch.cuda.Event:
    """Queue seconds of work on the current stream: the event recorded after it."""
    for _ in range(SPINS):
        torch.cuda._sleep(SPIN_CYCLES)
    busy = torch.cuda.Event()
    busy.record()
    return busy


def returned_while_the_device_was_busy(action: Callable[[], object]) -> bool:
    """Whether `action`, called right after seconds of queued work, returned before the device finished that work."""
    torch.cuda.synchronize()
    busy = keep_busy()
    action()
    returned_first = not busy.query()
    torch.cuda.synchronize()
    return returned_first
