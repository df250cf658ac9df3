import pytest

from app import doctor
from engine.constants import DEMO_MODEL


def test_every_check_prints_and_a_good_setup_passes(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))
    assert doctor.run(model=str(DEMO_MODEL)) == 0
    out = capsys.readouterr().out
    for name in ("Python", "GPU", "NVIDIA driver", "ffmpeg", "Speakers", "Model", "Disk space", "App folders",
                 "Gradio", "Package names"):
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
    assert len(results) == 10 and any("driver went away" in c.detail for c in results)


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
