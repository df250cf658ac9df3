from types import SimpleNamespace

import pytest

from app import doctor
from engine.constants import DEMO_FLAG, DEMO_MODEL


def test_every_check_prints_and_a_good_setup_passes(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))
    assert doctor.run(model=str(DEMO_MODEL)) == 0
    out = capsys.readouterr().out
    for name in ("Python", "GPU", "NVIDIA driver", "ffmpeg", "Speakers", "Model", "Realtime check", "Disk space",
                 "App folders", "Gradio", "Package names"):
        assert name in out
    assert "All required checks passed" in out


def test_a_broken_model_folder_fails_with_a_fix(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert doctor.run(model=str(tmp_path / "model")) == 1
    out = capsys.readouterr().out
    assert "[FAIL] Model" in out and "missing" in out and "fix:" in out and "Needs fixing: Model" in out


def test_missing_ffmpeg_is_a_warning_with_install_advice(monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    check = doctor.check_ffmpeg()
    assert check.status == doctor.WARN and "apt-get install ffmpeg" in check.fix


def test_a_crashing_check_does_not_hide_the_others(monkeypatch, tmp_path):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))

    def explode():
        raise RuntimeError("driver went away")

    monkeypatch.setattr(doctor, "check_driver", explode)
    results = doctor.run_checks(str(DEMO_MODEL))
    assert len(results) == 11 and any("driver went away" in c.detail for c in results)


@pytest.mark.parametrize("installed, status", [("6.30.9", doctor.FAIL), ("6.31.0", doctor.OK), ("7.0.0", doctor.FAIL)])
def test_gradio_is_checked_against_the_range_pyproject_asks_for(monkeypatch, installed, status):
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed if name == "gradio" else real(name))
    check = doctor.check_gradio()
    assert check.status == status and installed in check.detail
    if status == doctor.FAIL:
        assert "<7,>=6.31" in check.detail and check.fix == "pip install 'gradio<7,>=6.31'"


def test_hugging_face_kernels_installed_beside_ours_fails_with_a_fix(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.19.1" if name == "kernels" else "1.0")
    check = doctor.check_kernels_name()
    assert check.status == doctor.FAIL and "0.19.1" in check.detail and "pip uninstall kernels" in check.fix


def test_without_hugging_face_kernels_the_name_is_ours():
    check = doctor.check_kernels_name()
    assert check.status == doctor.OK


@pytest.fixture
def real_model(tmp_path):
    """The demo checkpoint without its demo mark: a stand-in for a real one."""
    import json
    import shutil

    model = shutil.copytree(DEMO_MODEL, tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    config.pop(DEMO_FLAG)
    (model / "config.json").write_text(json.dumps(config))
    return model


def on_a_gpu(monkeypatch, label="NVIDIA L4, sm_89"):
    import torch

    from engine.lm import modes

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(modes, "device_label", lambda device: label)


def keep(model, result, backend="W4A4 INT4-MMA (NVIDIA L4, sm_89)", recipe="{}", checked=None):
    """Keep `result` as the app does; `checked`: the time it says it was checked (ISO), when the test sets it."""
    import json

    from app.realtime_check import CheckKey, RealtimeChecks
    from engine.quant.realtime import checkpoint_fingerprint

    checks, key = RealtimeChecks(worker=None, loader=None), CheckKey(checkpoint_fingerprint(model), backend, recipe)
    checks.keep(key, result)
    if checked is not None:
        path = key.file(checks.folder)
        path.write_text(json.dumps({**json.loads(path.read_text()), "checked": checked}))


def test_the_realtime_check_line_shows_the_kept_result_for_this_model_on_this_gpu(monkeypatch, tmp_path, real_model):
    from engine.checks.realtime import RealtimeCheck

    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    on_a_gpu(monkeypatch)
    check = doctor.check_realtime(str(real_model))
    assert check.status == doctor.OK and check.detail == ("not run yet: it runs the first time Realtime loads this "
                                                          "model on the NVIDIA L4, sm_89")
    keep(real_model, RealtimeCheck(0.97, 0.8, 0.98), backend="W8A8 FP8 (NVIDIA H200, sm_90)")  # another GPU's
    assert doctor.check_realtime(str(real_model)).detail.startswith("not run yet")
    keep(real_model, RealtimeCheck(0.97, 0.8, 0.98))
    check = doctor.check_realtime(str(real_model))
    assert check.status == doctor.OK
    assert check.detail.startswith("tokens 97 % equal to High fidelity, mel 0.8 dB, voice 0.98: fine (W4A4 INT4-MMA")
    keep(real_model, RealtimeCheck(0.31, 4.2, None, "no speaker model"))  # the same key, checked again: replaced
    check = doctor.check_realtime(str(real_model))
    assert check.status == doctor.WARN and check.detail.startswith("Realtime drifts from High fidelity: tokens 31 %")
    assert "High fidelity" in check.fix


def test_the_realtime_check_line_says_a_failed_check(monkeypatch, tmp_path, real_model):
    """A check whose result could not be kept (app/realtime_check.py notes why): a warning with the reason."""
    from app.realtime_check import CheckKey, RealtimeChecks
    from engine.quant.realtime import checkpoint_fingerprint

    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    on_a_gpu(monkeypatch)
    key = CheckKey(checkpoint_fingerprint(real_model), "W4A4 INT4-MMA (NVIDIA L4, sm_89)", "{}")
    RealtimeChecks(worker=None, loader=None).keep_failure(key, "its result could not be kept (TypeError: x)")
    check = doctor.check_realtime(str(real_model))
    assert check.status == doctor.WARN and check.detail.startswith(
        "the last check failed: its result could not be kept (TypeError: x) (W4A4 INT4-MMA (NVIDIA L4, sm_89), ")
    assert "runs again" in check.fix


def test_the_realtime_check_is_not_run_for_the_demo_model_or_without_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "not needed: without an NVIDIA GPU" in doctor.check_realtime(str(DEMO_MODEL)).detail
    on_a_gpu(monkeypatch)
    assert doctor.check_realtime(str(DEMO_MODEL)).detail == "not run for the demo model (its output is noise)"


def test_the_realtime_check_line_shows_this_models_newest_result(monkeypatch, tmp_path, real_model):
    """Another checkpoint's result on this GPU is not this model's; of two kept results (the recipe changed with an
    update, so both are kept), the newest is shown."""
    import shutil

    from engine.checks.realtime import RealtimeCheck

    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    on_a_gpu(monkeypatch)
    other_model = shutil.copytree(real_model, tmp_path / "other")
    (other_model / "model.safetensors").write_bytes(b"other weights")
    keep(other_model, RealtimeCheck(0.31, 4.2, None, "no speaker model"))
    assert doctor.check_realtime(str(real_model)).detail.startswith("not run yet")
    keep(real_model, RealtimeCheck(0.97, 0.8, 0.98), recipe='{"rank": 32}', checked="2026-12-02T10:00:00+00:00")
    keep(real_model, RealtimeCheck(0.31, 4.2, None), recipe='{"rank": 64}', checked="2026-12-03T10:00:00+00:00")
    assert doctor.check_realtime(str(real_model)).status == doctor.WARN
    keep(real_model, RealtimeCheck(0.97, 0.8, 0.98), recipe='{"rank": 32}', checked="2026-12-04T10:00:00+00:00")
    assert doctor.check_realtime(str(real_model)).status == doctor.OK


CU126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]  # torch 2.6 cu126's get_arch_list()


@pytest.mark.parametrize("capability, arch_list, runs", [
    ((12, 0), CU126, False),  # an RTX 50 with a PyTorch built before Blackwell: "no kernel image is available"
    ((12, 0), [*CU126, "sm_100", "sm_120"], True),
    ((8, 9), ["sm_80", "sm_86", "sm_90"], True),  # an sm_86 cubin runs on 8.9 (same major, later minor)
    ((8, 0), ["sm_86"], False),
    ((12, 0), ["sm_90", "compute_90"], True),  # the driver compiles PTX for later GPUs
    ((9, 0), ["sm_90a"], True),
    ((10, 0), ["compute_90a"], False),  # arch-specific PTX stays on its arch
])
def test_torch_has_kernels_for(capability, arch_list, runs):
    assert doctor.torch_has_kernels_for(capability, arch_list) is runs


def test_an_rtx_50_with_a_pytorch_built_before_it_fails_with_a_fix(monkeypatch):
    import torch

    rtx_5090 = SimpleNamespace(name="NVIDIA GeForce RTX 5090", major=12, minor=0, total_memory=32 * 2**30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: rtx_5090)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: CU126)
    check = doctor.check_gpu()
    assert check.status == doctor.FAIL and "no kernels for sm_120" in check.detail and "cu128" in check.fix
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: [*CU126, "sm_120"])
    assert doctor.check_gpu().status == doctor.OK


@pytest.mark.parametrize("platform, fix", [("win32", "--index-url https://download.pytorch.org/whl/cu128"),
                                           ("linux", "the Linux wheels on PyPI are CUDA builds")])
def test_a_cpu_build_of_pytorch_is_told_where_the_cuda_build_is(monkeypatch, platform, fix):
    """PyPI's torch for Windows is a CPU build: reinstalling from PyPI would change nothing there."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(doctor.sys, "platform", platform)
    check = doctor.check_gpu()
    assert check.status == doctor.WARN and fix in check.fix
