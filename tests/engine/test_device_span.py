import time

import pytest
import torch

from engine.device_span import DeviceSpan


def test_off_cuda_a_span_is_the_hosts_time_between_its_ends():
    span = DeviceSpan(torch.device("cpu"))
    with pytest.raises(RuntimeError, match="before end"):
        span.seconds()
    time.sleep(0.01)
    span.end()
    assert span.seconds() >= 0.01


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_a_span_measures_the_queued_work_not_the_hosts_calls():
    """seconds() waits for the queued work and gives its device time: at least the kernel's sleep."""
    device = torch.device("cuda")
    torch.cuda.synchronize(device)
    span = DeviceSpan(device)
    torch.cuda._sleep(50_000_000)  # tens of ms of device time on any GPU
    span.end()
    assert span.seconds() > 0.001


def test_on_cuda_a_span_is_timed_on_its_devices_stream(monkeypatch):
    """Both events go on the current stream of the span's device, which need not be the thread's current device (an
    engine loaded on cuda:1): `Event.record()` alone takes the current device's stream, where none of the work is."""
    recorded = []

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self, stream=None):
            recorded.append(stream)

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return 0.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: f"current stream of {device}")
    span = DeviceSpan(torch.device("cuda", 1))
    span.end()
    span.seconds()
    assert recorded == ["current stream of cuda:1"] * 2


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_span_on_another_gpu_than_the_threads_measures_that_gpus_work():
    device = torch.device("cuda", 1)
    torch.cuda.synchronize(device)
    with torch.cuda.device(0):
        span = DeviceSpan(device)
        with torch.cuda.device(device):
            torch.cuda._sleep(50_000_000)
        span.end()
        assert span.seconds() > 0.001
