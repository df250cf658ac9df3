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
