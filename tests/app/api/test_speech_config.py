"""What an API request asks the engine for: each of VoiceDesk's request fields where the request gives it,
else the app's saved setting (the launched-app tests hear pad, fade and normalize; the demo model's sound
has no pause for `remove_pauses` to shorten, so the mapping itself is checked here, field by field)."""
import pytest

from app.api.schemas import parse_speech
from app.api.speech import generation_config
from app.settings import Settings

SAVED = Settings(steps=20, guidance=1.5, postprocess=False, normalize_text=False, pad=0.3, fade=0.2,
                 denoise=False, preprocess=False)
# request field, value different from SAVED, GenerationConfig field, what it must hold then
OVERRIDES = [("steps", 8, "num_step", 8), ("guidance", 3.0, "guidance_scale", 3.0),
             ("remove_pauses", True, "postprocess_output", True), ("normalize", True, "normalize_text", True),
             ("speed", 1.5, "speed", 1.5)]


def config_for(**fields):
    body = parse_speech({"model": "tts-1", "input": "Hello.", "voice": "alloy", **fields})
    return generation_config(SAVED, body, seed=7)


def test_without_the_fields_the_saved_settings_apply():
    config = config_for()
    assert (config.num_step, config.guidance_scale, config.postprocess_output, config.normalize_text) == \
        (20, 1.5, False, False)
    assert (config.pad_duration, config.fade_duration, config.denoise, config.preprocess_prompt) == \
        (0.3, 0.2, False, False)
    assert config.speed is None and config.seed == 7  # OpenAI's speed 1.0: the model's own pace


@pytest.mark.parametrize("field, value, config_field, expected", OVERRIDES, ids=[o[0] for o in OVERRIDES])
def test_a_field_in_the_request_wins_over_the_saved_setting(field, value, config_field, expected):
    assert getattr(config_for(), config_field) != expected
    assert getattr(config_for(**{field: value}), config_field) == expected


def test_false_in_the_request_is_not_taken_for_missing():
    saved_on = Settings(postprocess=True, normalize_text=True)
    body = parse_speech({"model": "tts-1", "input": "Hello.", "voice": "alloy", "remove_pauses": False,
                         "normalize": False})
    config = generation_config(saved_on, body, seed=0)
    assert config.postprocess_output is False and config.normalize_text is False
