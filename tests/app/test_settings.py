import json
import logging

from app.settings import Settings


def test_round_trip(tmp_path):
    path = tmp_path / "settings.json"
    original = Settings(mode="realtime", language="fr", last_voice="grandpa", play_on_speakers=True,
                        output_device="USB Speakers", steps=16, guidance=2.5)
    original.save(path)
    assert Settings.load(path) == original


def test_missing_file_gives_defaults(tmp_path):
    assert Settings.load(tmp_path / "none.json") == Settings()


def test_bad_values_fall_back_to_defaults_with_a_warning(tmp_path, caplog):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mode": 3, "steps": "many", "guidance": 3, "unknown": 1, "denoise": False}))
    with caplog.at_level(logging.WARNING, logger="voicedesk"):
        s = Settings.load(path)
    assert s.mode == "hifi" and s.steps == 32  # rejected
    assert s.guidance == 3.0 and isinstance(s.guidance, float) and s.denoise is False  # accepted
    assert "mode" in caplog.text and "steps" in caplog.text


def test_corrupt_file_gives_defaults(tmp_path, caplog):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="voicedesk"):
        assert Settings.load(path) == Settings()
    assert "skipping" in caplog.text


def test_updated_saves_at_once(tmp_path):
    path = tmp_path / "settings.json"
    Settings().updated(path, language="de")
    assert Settings.load(path).language == "de"
