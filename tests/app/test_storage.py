import json
import logging
from pathlib import Path

import numpy as np
import pytest

from app import storage
from app.storage import AppDirs, atomic_write, atomic_write_json, read_json, write_audio
from engine.errors import StorageError


def test_voicedesk_home_moves_every_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    dirs = AppDirs.default().create()
    for folder in (dirs.config, dirs.data, dirs.cache, dirs.voices, dirs.history, dirs.uploads):
        assert folder.is_dir() and folder.is_relative_to(tmp_path / "home")
    assert (dirs.voices.stat().st_mode & 0o777) == 0o700


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "settings.json"
    atomic_write_json(target, {"v": 1})

    def crash(tmp):
        Path(tmp).write_text('{"v": 2, "half')  # a writer dying half-way
        raise OSError("disk full")

    with pytest.raises(StorageError, match=f"Could not save in {tmp_path}"):  # says where
        atomic_write(target, crash)
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


@pytest.mark.parametrize("content", ['{"v": 1', "[1, 2]", "\xff\xfe garbage", '{"v": ' + "1" * 5000 + "}",
                                     "[" * 100_000])
def test_corrupt_json_is_skipped_with_a_warning(tmp_path, caplog, content):
    path = tmp_path / "meta.json"
    path.write_bytes(content.encode("latin-1"))
    with caplog.at_level(logging.WARNING, logger="app"):
        assert read_json(path) is None
    assert "skipping" in caplog.text and str(path) in caplog.text


def test_audio_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "take.wav"
    write_audio(target, np.full(2400, 0.25, np.float32), 24000)
    before = target.read_bytes()

    def dies_half_way(file, data, samplerate, **kwargs):
        real_write(file, data[: len(data) // 2], samplerate, **kwargs)
        raise OSError("disk full")

    real_write = storage.sf.write
    monkeypatch.setattr(storage.sf, "write", dies_half_way)
    with pytest.raises(StorageError, match="disk full"):
        write_audio(target, np.full(48000, -0.5, np.float32), 24000)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["take.wav"]  # no temporary file left behind
