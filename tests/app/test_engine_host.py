"""Loading the model on the worker: whatever goes wrong reaches the page (the host's state) and the
terminal (the log) with what to do, instead of a state stuck at "Waiting for the GPU"."""
import logging

import pytest

from app.engine_host import EngineHost
from app.worker import GpuWorker


@pytest.fixture
def worker():
    w = GpuWorker()
    yield w
    w.shutdown()


def test_an_unknown_mode_fails_visibly(worker, caplog):
    host = EngineHost(worker, "/nonexistent/never/loaded")
    with caplog.at_level(logging.ERROR, logger="app"):
        host.start("turbo")  # e.g. from a hand-edited settings.json
        state = host.wait_ready(30)
    assert state.failed and "Unknown quality mode 'turbo': choose one of eager, hifi, realtime" in state.message
    assert "Unknown quality mode 'turbo'" in caplog.text


def test_a_missing_model_folder_fails_visibly(worker, tmp_path, caplog):
    host = EngineHost(worker, str(tmp_path / "no-model-here"))
    with caplog.at_level(logging.ERROR, logger="app"):
        host.start("eager")
        state = host.wait_ready(60)
    assert state.failed and "no-model-here" in state.message
    assert "could not be loaded" in caplog.text and "no-model-here" in caplog.text


def test_an_unexpected_error_names_the_next_step(worker, caplog):
    def broken_loader(model, device, mode, progress):
        raise RuntimeError("CUDA driver version is insufficient")

    host = EngineHost(worker, None, loader=broken_loader)
    with caplog.at_level(logging.ERROR, logger="app"):
        host.start("hifi")
        state = host.wait_ready(30)
    assert state.failed and "CUDA driver version is insufficient" in state.message and "doctor" in state.message
    assert "Traceback" in caplog.text  # the terminal gets the details
