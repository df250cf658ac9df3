import json
import logging
from dataclasses import asdict

import pytest

from app.settings import DEFAULTS, Settings
from engine.errors import SettingError


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
    with caplog.at_level(logging.WARNING, logger="app"):
        s = Settings.load(path)
    assert s.mode == "hifi" and s.steps == 32  # rejected
    assert s.guidance == 3.0 and isinstance(s.guidance, float) and s.denoise is False  # accepted
    assert "mode" in caplog.text and "steps" in caplog.text


def test_corrupt_file_gives_defaults(tmp_path, caplog):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="app"):
        assert Settings.load(path) == Settings()
    assert "skipping" in caplog.text


def test_the_defaults_are_the_classs_own_and_cannot_be_changed():
    """What `updated` and `check` hold a value's kind to: one shared mapping, so it must stay as the class has it."""
    assert dict(DEFAULTS) == asdict(Settings())
    with pytest.raises(TypeError):
        DEFAULTS["steps"] = 8


def test_updated_saves_at_once(tmp_path):
    path = tmp_path / "settings.json"
    Settings().updated(path, language="de")
    assert Settings.load(path).language == "de"


@pytest.mark.parametrize("changes, said", [
    ({"check_candidates": 100}, "check_candidates = 100 is not valid: use a whole number from 2 to 8."),
    ({"check_candidates": 9}, "check_candidates = 9 is not valid"),  # one past the edge
    ({"check_max_wer": float("nan")}, "check_max_wer = nan is not valid: use a number from 0.0 to 1.0."),
    ({"check_mode": "bogus"}, "check_mode = 'bogus' is not valid: use one of off, check, retake, best_of_n."),
    ({"steps": 12, "api": "yes"}, "api = 'yes' is not valid: use true or false."),  # a good change with a bad one
])
def test_updated_refuses_what_check_would_replace_and_changes_nothing(tmp_path, changes, said):
    """A value saved at run time (an API client's /set_checks) is held to the rules a start holds the file to: a
    bad one is refused with what is expected, before anything is changed or written."""
    path = tmp_path / "settings.json"
    settings = Settings()
    with pytest.raises(SettingError) as refused:
        settings.updated(path, **changes)
    assert str(refused.value).startswith(said) and settings == Settings() and not path.exists()
    settings.updated(path, check_candidates=8, check_max_wer=1.0, steps=12)  # the edges themselves are fine
    assert Settings.load(path) == settings


def test_values_out_of_range_fall_back_to_defaults_and_are_reported(tmp_path, caplog):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mode": "turbo", "guidance": -5, "steps": 0, "history_max_entries": 0,
                                "history_max_mb": -1, "language": "klingon", "denoise": False, "steps_x": 3}))
    with caplog.at_level(logging.WARNING, logger="app"):
        settings, problems = Settings.check(path)
    defaults = Settings()
    assert (settings.mode, settings.guidance, settings.steps) == (defaults.mode, defaults.guidance, defaults.steps)
    assert settings.history_max_entries == defaults.history_max_entries >= 1
    assert (settings.history_max_mb, settings.language, settings.denoise) == (defaults.history_max_mb, "auto", False)
    assert len(problems) == 6
    assert "mode = 'turbo' is not valid (one of eager, hifi, realtime): using 'hifi'" in problems
    assert "guidance = -5 is not valid (a number from 0.0 to 4.0): using 2.0" in problems
    assert "history_max_entries = 0 is not valid (a whole number from 1 to 100000): using 200" in problems
    assert "guidance = -5" in caplog.text


def test_values_at_the_edges_of_their_range_are_kept(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mode": "eager", "guidance": 0, "steps": 64, "history_max_entries": 1,
                                "language": "de"}))
    settings, problems = Settings.check(path)
    assert problems == [] and (settings.mode, settings.guidance, settings.steps) == ("eager", 0.0, 64)
    assert (settings.history_max_entries, settings.language) == (1, "de")


def test_true_is_not_a_number(tmp_path, caplog):
    """JSON's true is a Python bool, which is an int: steps=true would have become 1 step."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"steps": True, "guidance": False, "history_max_entries": True, "denoise": 1}))
    settings, problems = Settings.check(path)
    assert (settings.steps, settings.guidance, settings.history_max_entries) == (32, Settings().guidance, 200)
    assert settings.denoise is True and len(problems) == 4  # and 1 is not a bool


def test_without_the_tn_extra_speak_numbers_falls_back(monkeypatch):
    """'Speak numbers' is on by default; without voicedesk[tn] every generation failed."""
    monkeypatch.setattr("app.settings.normalize_available", lambda: False)
    assert Settings().normalize_text is True and Settings().speaks_numbers is False
    monkeypatch.setattr("app.settings.normalize_available", lambda: True)
    assert Settings().speaks_numbers is True and Settings(normalize_text=False).speaks_numbers is False


def test_each_setting_goes_to_its_own_generation_field(monkeypatch):
    """Settings.generation_config (the API's, the WebSocket's and Wyoming's base): each setting in its own field,
    told apart by values no two of them share; numbers are spoken as words only where the tn package is."""
    import app.settings as settings_module

    saved = Settings(steps=12, guidance=2.5, denoise=False, preprocess=True, postprocess=False, pad=0.3, fade=0.05,
                     normalize_text=True)
    monkeypatch.setattr(settings_module, "normalize_available", lambda: True)
    config = saved.generation_config(seed=9)
    assert (config.num_step, config.guidance_scale, config.denoise, config.preprocess_prompt,
            config.postprocess_output, config.pad_duration, config.fade_duration, config.normalize_text,
            config.seed) == (12, 2.5, False, True, False, 0.3, 0.05, True, 9)
    monkeypatch.setattr(settings_module, "normalize_available", lambda: False)
    assert saved.generation_config(seed=9).normalize_text is False


@pytest.mark.parametrize("drawn", ["lowest", "highest"])
def test_a_random_seed_is_one_a_person_can_send_back(monkeypatch, drawn):
    """random_seed draws from all of 0..MAX_PICKED_SEED, and the API takes what it drew (and nothing above)."""
    import secrets

    from pydantic import ValidationError

    from app.api.schemas import SpeechRequest
    from app.settings import MAX_PICKED_SEED, random_seed

    monkeypatch.setattr(secrets, "randbelow", lambda n: 0 if drawn == "lowest" else n - 1)
    seed = random_seed()
    assert seed == (0 if drawn == "lowest" else MAX_PICKED_SEED)
    assert SpeechRequest(model="tts-1", input="Hi.", voice="alloy", seed=seed).seed == seed
    with pytest.raises(ValidationError):
        SpeechRequest(model="tts-1", input="Hi.", voice="alloy", seed=MAX_PICKED_SEED + 1)
