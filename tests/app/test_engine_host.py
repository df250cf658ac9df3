"""Loading the model on the worker: whatever goes wrong reaches the page (the host's state) and the
terminal (the log) with what to do, instead of a state stuck at "Waiting for the GPU"."""
import logging
import threading
import time
from types import SimpleNamespace

import torch

from app.engine_host import EngineHost
from app.worker import outcome
from engine.config import Mode


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


def test_running_out_of_gpu_memory_while_loading_is_said_for_a_person(worker):
    def greedy_loader(model, device, mode, progress):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
                                          "capacity of 7.63 GiB of which 100.00 MiB is free. Including non-PyTorch ...")

    host = EngineHost(worker, None, loader=greedy_loader)
    host.start("hifi")
    state = host.wait_ready(30)
    assert state.failed and state.message.startswith("The GPU ran out of memory while loading the model (CUDA out of "
                                                     "memory. Tried to allocate 512.00 MiB."), state.message
    assert "doctor" not in state.message  # not a setup problem: other programs hold the memory


def test_jobs_one_at_a_time_run_on_the_thread_that_warmed_the_model_up(worker):
    """CUDA keeps state per thread (cuBLAS and cuDNN handles, cuDNN's plans for each shape): a job that runs alone,
    such as a lone client's request, runs on the thread where the model was loaded and warmed up, also after jobs
    ran side by side on threads of their own."""
    warmed = []
    engine = SimpleNamespace(mode=Mode.HIFI, device=torch.device("cpu"), is_demo=True, backend="stand-in",
                             synthesize=lambda text, config: warmed.append(threading.get_ident()))
    host = EngineHost(worker, None, loader=lambda model, device, mode, progress: engine)
    host.start("hifi")
    assert host.wait_ready(30).ready and len(warmed) == 1
    started, releases = {}, [threading.Event() for _ in range(4)]

    def beside(n):
        started[n] = threading.get_ident()
        assert releases[n].wait(30)

    jobs = [worker.submit(lambda cancel, n=n: beside(n), owner=f"client-{n}", batch="key") for n in range(4)]
    deadline = time.monotonic() + 30
    while len(started) < len(jobs):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(set(started.values())) == len(jobs) and started[0] == warmed[0]
    for job, release in zip(jobs, releases):  # the warm thread is freed first, the others after it
        release.set()
        outcome(worker.result(job))
    alone = [worker.call(lambda cancel: threading.get_ident()) for _ in range(2 * len(jobs))]
    assert set(alone) == set(warmed)
