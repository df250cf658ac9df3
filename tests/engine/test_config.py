"""GenerationConfig: upstream's knobs and defaults, each checked on construction with a message that names
the setting and the range it accepts."""
import json
from dataclasses import fields
from pathlib import Path

import pytest

from engine.config import MAX_STEPS, SETTING_RANGES, SWITCHES, GenerationConfig
from engine.errors import SettingError, VoiceDeskError

GOLDENS = Path(__file__).parents[1] / "data" / "goldens"


def test_every_upstream_knob_exists_with_upstreams_default():
    postprocess = json.loads((GOLDENS / "postprocess.json").read_text())["cases"]["ref_rms_none"]
    recorded = json.loads((GOLDENS / "generate" / "clone_6s.json").read_text())["generation_config"]
    ours = GenerationConfig()
    assert set(recorded) <= {f.name for f in fields(ours)}
    assert (ours.pad_duration, ours.fade_duration) == (postprocess["pad_duration"], postprocess["fade_duration"])
    greedy = {"position_temperature", "class_temperature"}  # the recording set these to 0
    assert all(getattr(ours, k) == v for k, v in recorded.items() if k not in greedy)
    assert ours.normalize_text is False  # upstream's generate(normalize_text=False)


def test_every_field_is_checked():
    assert set(SETTING_RANGES) | SWITCHES == {f.name for f in fields(GenerationConfig)}


@pytest.mark.parametrize("field, value, message", [
    ("num_step", 200, "steps must be a whole number from 1 to 128, not 200"),
    ("num_step", 8.5, "steps must be a whole number"),
    ("guidance_scale", float("nan"), "guidance must be a number from 0 to 10"),
    ("t_shift", 0.0, "t_shift must be a number above 0 and at most 10"),
    ("layer_penalty_factor", -1.0, "layer_penalty_factor must be a number from 0 to 100"),
    ("position_temperature", float("inf"), "position_temperature must be a number"),
    ("class_temperature", True, "class_temperature must be a number"),
    ("class_temperature", -0.1, "class_temperature must be a number from 0"),
    ("denoise", 1, "denoise must be true or false"),
    ("normalize_text", "yes", "normalize_text must be true or false"),
    ("audio_chunk_duration", -1.0, "audio_chunk_duration must be a number from 0 to 600"),
    ("audio_chunk_threshold", 601, "audio_chunk_threshold must be a number from 0 to 600"),
    ("pad_duration", -0.1, "pad must be a number from 0 to 10"),
    ("fade_duration", 11, "fade must be a number from 0 to 10"),
    ("speed", 0, "speed must be a number from 0.25 to 4"),
    ("duration", -2.0, "duration must be a number above 0"),
    ("seed", "7", "seed must be a whole number"),
])
def test_bad_values_are_refused_on_construction(field, value, message):
    with pytest.raises(SettingError) as err:
        GenerationConfig(**{field: value})
    assert message in str(err.value) and isinstance(err.value, VoiceDeskError)
    with pytest.raises(SettingError):
        GenerationConfig().replace(**{field: value})


def test_values_at_the_edges_are_accepted():
    edges = GenerationConfig(num_step=MAX_STEPS, guidance_scale=0, t_shift=1e-3, pad_duration=0, fade_duration=0,
                             audio_chunk_duration=0, speed=4, duration=600, seed=0, class_temperature=0)
    assert edges.num_step == MAX_STEPS and edges.check() is edges
    assert GenerationConfig(speed=None, duration=None, seed=None).seed is None
