"""Every ranged field of a speech request and of an answer socket's start message takes both ends of its range and
refuses the nearest value beyond each (a bound written as `gt` for `ge`, or one off, fails here): 400 naming it."""
import math

import pytest

from app.api.answer_socket import AnswerStart
from app.api.errors import ApiError
from app.api.schemas import SpeechRequest, validated
from app.settings import MAX_PICKED_SEED, RANGES
from engine.checks.budget import MAX_BUDGET_MS
from engine.config import SETTING_RANGES

# field, lowest, highest; ints step by one, floats by the next representable value
BOUNDS = [("speed", SETTING_RANGES["speed"][1], SETTING_RANGES["speed"][2]), ("seed", 0, MAX_PICKED_SEED),
          ("steps", *RANGES["steps"]), ("guidance", *RANGES["guidance"])]
BODIES = {SpeechRequest: {"model": "tts-1", "input": "Hello.", "voice": "alloy"},
          AnswerStart: {"type": "start", "voice": "alloy"}}


def beyond(value, direction: int):
    return value + direction if isinstance(value, int) else math.nextafter(value, direction * math.inf)


def cases():
    for model, body in BODIES.items():
        extra = [("check_budget_ms", 0, MAX_BUDGET_MS)] if model is AnswerStart else []
        for field, lowest, highest in BOUNDS + extra:
            yield pytest.param(model, body, field, lowest, highest, id=f"{model.__name__}-{field}")


@pytest.mark.parametrize("model, body, field, lowest, highest", list(cases()))
def test_both_ends_pass_and_one_step_beyond_is_refused(model, body, field, lowest, highest):
    for value in (lowest, highest):
        assert getattr(validated(model, {**body, field: value}), field) == value
    for value in (beyond(lowest, -1), beyond(highest, +1)):
        with pytest.raises(ApiError) as refusal:
            validated(model, {**body, field: value})
        assert (refusal.value.status, refusal.value.param) == (400, field), value
