"""The tests' throwaway VoiceDesk folder (tests/conftest.py) is gone once the test run that made it ends."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORD = "VOICEDESK_TEST_HOME_RECORD"  # where the inner run writes the folder it ran with


@pytest.mark.skipif(RECORD not in os.environ, reason="run by test_a_test_run_removes_its_folder")
def test_the_folder_is_recorded():
    home = Path(os.environ["VOICEDESK_HOME"])
    (home / "kept.txt").write_text("what a test left")
    Path(os.environ[RECORD]).write_text(str(home))


def test_a_test_run_removes_its_folder(tmp_path):
    record = tmp_path / "home.txt"
    env = {key: value for key, value in os.environ.items() if key != "VOICEDESK_HOME"}
    env[RECORD] = str(record)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"{Path(__file__).relative_to(ROOT)}::test_the_folder_is_recorded"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    home = Path(record.read_text())
    assert home.name.startswith("voicedesk-tests-")
    assert not home.exists()


def test_a_folder_given_is_left_alone(tmp_path):
    record, given = tmp_path / "home.txt", tmp_path / "given"
    given.mkdir()
    env = {**os.environ, "VOICEDESK_HOME": str(given), RECORD: str(record)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"{Path(__file__).relative_to(ROOT)}::test_the_folder_is_recorded"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert Path(record.read_text()) == given
    assert (given / "kept.txt").exists()
