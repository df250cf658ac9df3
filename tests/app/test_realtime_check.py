"""The app's Realtime check (app/realtime_check.py): it runs once per (checkpoint, backend, recipe) on the GPU
worker, keeps its result across restarts, runs again when the checkpoint or the backend changes, says a drift
with its advice beside the quality switch, and does not run for the demo model or without a GPU. The demo
model on the CPU stands in for a real checkpoint on a GPU: the gate is opened by injection, and the gate
itself is tested on the facts it reads."""
import gc
import os
import shutil
import threading
import time
import weakref
from types import SimpleNamespace

import pytest
import torch

from app.engine_host import EngineHost, HostState
from app.realtime_check import DONE, FAILED, OFF, RUNNING, CheckKey, CheckStatus, RealtimeChecks, gate, why_not_checked
from app.ui.status import keep_polling, realtime_check_html
from engine.config import Mode
from engine.constants import DEMO_MODEL
from engine.engine import Engine
from tools.realtime_drift_scan import perturb

TIMEOUT_S = 300


@pytest.fixture
def busy(worker):
    """The worker busy with a generation until `busy.set()`."""
    started, release = threading.Event(), threading.Event()
    worker.submit(lambda cancel: (started.set(), release.wait(TIMEOUT_S)))
    assert started.wait(TIMEOUT_S)
    yield release
    release.set()


class Loads:
    """Engine.load, counting the modes it loads and keeping the devices it was asked for."""

    def __init__(self, fail: Exception | None = None):
        self.modes, self.devices, self.fail = [], [], fail

    def __call__(self, model, device="auto", mode=Mode.HIFI, progress=None):  # Engine.load's default device
        self.modes.append(Mode(mode))
        self.devices.append(device)
        if self.fail is not None:
            raise self.fail
        return Engine.load(model, device=device, mode=mode, progress=progress)


def no_speaker(device):
    return lambda: (None, "no speaker model here")


def service(worker, loads, folder, **kwargs):
    return RealtimeChecks(worker, loads, folder, speaker=no_speaker, gate=lambda engine: None, **kwargs)


def settled(checks: RealtimeChecks):
    deadline = time.monotonic() + TIMEOUT_S
    while checks.status().busy and time.monotonic() < deadline:
        time.sleep(0.05)
    return checks.status()


def realtime(model=DEMO_MODEL) -> Engine:
    return Engine.load(model, device="cpu", mode=Mode.REALTIME)


@pytest.fixture(scope="module")
def engine():
    return realtime()


def test_it_runs_once_and_is_kept_across_restarts(worker, tmp_path, engine):
    loads = Loads()
    first = service(worker, loads, tmp_path)
    first.after_load(engine)
    status = settled(first)
    assert status.state == DONE and status.result.token_agreement == 1.0 and status.result.mel_db == 0.0
    assert status.line() == "Realtime checked on this GPU: tokens 100 % equal to High fidelity, mel 0.0 dB: fine"
    assert loads.modes == [Mode.HIFI] and len(list(tmp_path.glob("*.json"))) == 1
    assert loads.devices == [engine.device]  # High fidelity beside Realtime, on its GPU (--device cuda:1 too)
    restarted = service(worker, loads, tmp_path)  # a new app start: the same folder, the same key
    restarted.after_load(engine)
    assert restarted.status().state == DONE and restarted.status().result == status.result
    assert loads.modes == [Mode.HIFI]  # nothing rendered again


def test_a_new_backend_runs_it_again(worker, tmp_path, engine, monkeypatch):
    loads = Loads()
    checks = service(worker, loads, tmp_path)
    checks.after_load(engine)
    assert settled(checks).state == DONE and loads.modes == [Mode.HIFI]
    monkeypatch.setattr(engine, "backend", "W8A8 FP8 (Hopper has no INT4 tensor cores) (NVIDIA H200, sm_90)")
    checks.after_load(engine)
    assert settled(checks).state == DONE and loads.modes == [Mode.HIFI, Mode.HIFI]
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_new_weights_run_it_again(worker, tmp_path):
    model = shutil.copytree(DEMO_MODEL, tmp_path / "model")
    loads = Loads()
    checks = service(worker, loads, tmp_path / "results")
    engine = realtime(model)
    checks.after_load(engine)
    assert settled(checks).state == DONE and loads.modes == [Mode.HIFI]
    weights = model / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))  # e.g. downloaded again
    checks.after_load(engine)
    assert settled(checks).state == DONE and loads.modes == [Mode.HIFI, Mode.HIFI]


def test_the_key_holds_the_checkpoint_the_backend_and_the_recipe(engine):
    key = CheckKey.of(engine)
    assert key.backend == engine.backend and '"rank": 32' in key.recipe and len(key.checkpoint) == 32


def test_a_drift_is_said_beside_the_quality_switch_with_its_advice(worker, tmp_path):
    drifting = realtime()
    perturb(drifting, 0.5)  # a Realtime whose weights went wrong: noise of half each matrix's spread
    checks = service(worker, Loads(), tmp_path)
    checks.after_load(drifting)
    status = settled(checks)
    assert status.state == DONE and status.result.verdict == "drift"
    line = status.line()
    assert line.startswith("Realtime drifts from High fidelity on this GPU: tokens ") and "(at least 50 %)" in line
    assert line.endswith("Choose High fidelity for the best quality.")
    shown = realtime_check_html(status)
    assert 'class="vd-realtime-check vd-rtc-drift"' in shown and "Choose High fidelity" in shown


def test_the_page_shows_the_state_while_it_runs(worker, busy, tmp_path, engine):
    checks = service(worker, Loads(), tmp_path)
    checks.after_load(engine)  # queued behind the generation: the page is not held up
    status = checks.status()
    busy.set()
    assert status.busy and "vd-rtc-waiting" in realtime_check_html(status)
    assert status.line() == ("Checking Realtime against High fidelity on this GPU (once for this model): "
                             "waiting for the GPU")
    assert settled(checks).state == DONE


def test_a_check_still_waiting_when_another_model_loads_is_dropped(worker, busy, tmp_path, engine):
    loads = Loads()
    checks = service(worker, loads, tmp_path)
    checks.after_load(engine)
    checks.reset()  # the user switched modes: the reload is queued behind the check
    busy.set()
    worker.call(lambda cancel: None)  # every job queued before this one is done
    assert loads.modes == [] and checks.status().state == OFF and not list(tmp_path.glob("*.json"))


def test_a_waiting_check_does_not_keep_the_model_alive(worker, busy, tmp_path):
    checks = service(worker, Loads(), tmp_path)
    replaced = realtime()
    checks.after_load(replaced)
    alive = weakref.ref(replaced)
    del replaced
    gc.collect()
    assert alive() is None  # a reload frees the old model's memory first, check queued or not
    busy.set()
    worker.call(lambda cancel: None)
    assert checks.status().state == OFF


def test_a_check_that_fails_is_said_not_kept_and_tried_at_the_next_load(worker, tmp_path, engine):
    loads = Loads(fail=RuntimeError("CUDA out of memory"))
    checks = service(worker, loads, tmp_path)
    checks.after_load(engine)
    status = settled(checks)
    assert status.state == FAILED
    assert status.line() == "Realtime could not be checked on this GPU: RuntimeError: CUDA out of memory"
    assert not list(tmp_path.glob("*.json"))
    loads.fail = None
    checks.after_load(engine)
    assert settled(checks).state == DONE and len(loads.modes) == 2


def test_a_check_that_cannot_start_is_said_and_the_load_goes_on(worker, tmp_path, engine, monkeypatch):
    """after_load runs inside the model's load: a check that cannot even make its key (a weight file gone
    meanwhile) says why, and the model still becomes ready."""
    from engine.quant import realtime as quant_realtime

    def gone(folder):
        raise FileNotFoundError(f"{folder}/model.safetensors")

    monkeypatch.setattr(quant_realtime, "checkpoint_fingerprint", gone)
    checks = service(worker, Loads(), tmp_path)
    checks.after_load(engine)  # does not raise
    assert checks.status().state == FAILED and "FileNotFoundError" in checks.status().line()


def test_a_result_that_cannot_be_kept_is_shown_all_the_same(worker, tmp_path, engine, monkeypatch):
    """A full or read-only disk (StorageError from the atomic writer): the check's result is shown, only not
    kept for the next start; the page does not wait on a check that never ends."""
    import app.realtime_check as realtime_check
    from engine.errors import StorageError

    def full(path, value):
        raise StorageError("The disk is full.")

    monkeypatch.setattr(realtime_check, "atomic_write_json", full)
    checks = service(worker, Loads(), tmp_path)
    checks.after_load(engine)
    status = settled(checks)
    assert status.state == DONE and status.result.verdict == "fine" and not list(tmp_path.glob("*.json"))


def test_a_result_that_breaks_keeping_ends_failed_and_is_noted_for_doctor(worker, tmp_path, engine, monkeypatch,
                                                                         caplog):
    """A fault of ours while keeping the result (here a NumPy float, which JSON cannot write): the check ends
    failed with why, on the page and in the log, never "running" for ever; the failure is kept for `voicedesk
    doctor` (latest_for), and the next load checks again."""
    import json

    import numpy as np

    from app.realtime_check import latest_for
    from engine.checks.realtime import RealtimeCheck

    monkeypatch.setattr(RealtimeCheck, "to_dict", lambda self: {"token_agreement": np.float32(1.0)})
    loads = Loads()
    checks = service(worker, loads, tmp_path)
    keep_failure, shown_while_noting = checks.keep_failure, []
    monkeypatch.setattr(checks, "keep_failure", lambda *args: shown_while_noting.append(checks.status().state)
                        or keep_failure(*args))
    checks.after_load(engine)
    status = settled(checks)
    assert status.state == FAILED and status.line().startswith(
        "Realtime could not be checked on this GPU: its result could not be kept (TypeError: Object of type float32")
    assert any(r.levelname == "ERROR" and "could not be kept" in r.message for r in caplog.records)
    key = CheckKey.of(engine)
    record = json.loads(key.file(tmp_path).read_text())
    assert record["failed"] == status.message and "result" not in record
    assert shown_while_noting == [RUNNING]  # the note is kept before the page says failed
    assert latest_for(key.checkpoint, "CPU", tmp_path) == (None, record)  # the backend "FP32 eager (CPU)"
    monkeypatch.undo()
    checks.after_load(engine)  # a kept failure is not a result: the next load runs the check
    assert settled(checks).state == DONE and len(loads.modes) == 2 and "result" in json.loads(
        key.file(tmp_path).read_text())


@pytest.mark.parametrize("mode, device_type, demo, runs", [
    (Mode.REALTIME, "cuda", False, True),
    (Mode.REALTIME, "cpu", False, False),
    (Mode.REALTIME, "cuda", True, False),
    (Mode.HIFI, "cuda", False, False),
])
def test_only_realtime_with_real_weights_on_a_gpu_is_checked(mode, device_type, demo, runs):
    why = why_not_checked(mode=mode, device_type=device_type, demo=demo)
    assert (why is None) == runs
    facts = SimpleNamespace(mode=mode, device=torch.device(device_type), is_demo=demo)
    assert gate(facts) == why


def test_the_demo_model_on_a_cpu_is_not_checked(worker, tmp_path, engine):
    loads = Loads()
    checks = RealtimeChecks(worker, loads, tmp_path, speaker=no_speaker)  # the real gate
    checks.after_load(engine)
    assert checks.status().state == OFF and checks.status().line() == "" and realtime_check_html(checks.status()) == ""
    assert "no NVIDIA GPU" in checks.status().message
    worker.call(lambda cancel: None)  # the worker is serial: a job queued before this one would be done
    assert loads.modes == [] and not list(tmp_path.glob("*.json"))


def test_the_host_queues_the_check_before_it_says_ready(worker, tmp_path):
    loads = Loads()
    checks = service(worker, loads, tmp_path)
    host = EngineHost(worker, str(DEMO_MODEL), device="cpu", loader=loads, realtime_check=checks)
    host.start("realtime")
    deadline = time.monotonic() + TIMEOUT_S
    while not host.state().ready and time.monotonic() < deadline:
        time.sleep(0.01)
    assert checks.status().state != OFF  # a page that sees "ready" sees the check under way too (or done)
    assert settled(checks).state == DONE and loads.modes == [Mode.REALTIME, Mode.HIFI]


@pytest.mark.parametrize("stage, check, polling", [
    ("load", OFF, True),
    ("ready", RUNNING, True),  # the page keeps asking until the check's result is in
    ("ready", DONE, False),
    ("ready", OFF, False),
    ("failed", OFF, False),
])
def test_the_header_polls_until_the_check_is_done(stage, check, polling):
    assert keep_polling(HostState(stage, 1.0, ""), CheckStatus(check)) is polling


def test_the_voice_is_compared_with_the_take_checks_own_speaker_model(monkeypatch, tmp_path, tiny_speaker_model):
    from app.realtime_check import local_speaker
    from engine.checks import checker as checker_module
    from engine.checks.voice import SpeakerEncoder
    from engine.hub import HubModel

    monkeypatch.setattr(checker_module, "SPEAKER_MODEL", HubModel(tiny_speaker_model, "test"))
    encoder, why = local_speaker("cpu")()
    assert isinstance(encoder, SpeakerEncoder) and why is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(checker_module, "SPEAKER_MODEL", HubModel("nobody/no-such-speaker", "test"))
    assert local_speaker("cpu")() == (None, "the speaker model (nobody/no-such-speaker) is not on this computer")
