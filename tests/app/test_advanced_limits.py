"""app/ui/advanced.make_config: a number field past its bounds is refused naming the field and its bounds (the page
shows it under Generate); the bounds are inclusive, and the seed is checked only when it is used."""
import pytest

from app.settings import MAX_PICKED_SEED
from app.ui.advanced import make_config
from engine.errors import SettingError

FIELDS = {"speed": 1.0, "duration": 0, "steps": 32, "guidance": 2.0, "denoise": True, "seed": 1, "randomize": False,
          "preprocess": True, "postprocess": True, "pad": 0.1, "fade": 0.1}


@pytest.mark.parametrize(("field", "value", "said"), [
    ("duration", -1, "Duration (s) must be from 0 to 600, not -1."),
    ("seed", MAX_PICKED_SEED + 1, f"Seed must be from 0 to {MAX_PICKED_SEED}, not {MAX_PICKED_SEED + 1}."),
    ("speed", 1.55, "Speed must be from 0.5 to 1.5, not 1.55."),
    ("steps", 3, "Steps must be from 4 to 64, not 3."),
])
def test_a_value_past_its_bounds_names_the_field(field, value, said):
    with pytest.raises(SettingError) as refused:
        make_config(**{**FIELDS, field: value})
    assert str(refused.value) == said


@pytest.mark.parametrize(("field", "value"), [("duration", 600), ("seed", MAX_PICKED_SEED), ("seed", 0),
                                              ("speed", 0.5), ("steps", 64), ("fade", 0.5)])
def test_the_bounds_themselves_are_taken(field, value):
    make_config(**{**FIELDS, field: value})


def test_a_seed_past_its_bounds_is_no_matter_when_a_new_one_is_drawn():
    assert 0 <= make_config(**{**FIELDS, "seed": -1, "randomize": True}).seed <= MAX_PICKED_SEED
