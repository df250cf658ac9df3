"""The speech request's length limits, checked before anything is queued: a text or a voice description exactly at
its limit passes, one character more is 413 naming the field; characters are code points, so an emoji counts one
(the launched-app tests send one past each limit through the `openai` client)."""
import pytest

from app.api.errors import ApiError
from app.api.speech import _check_text
from engine.text.limits import MAX_INSTRUCT_CHARS, MAX_TEXT_CHARS

EMOJI = "\U0001f600"  # two UTF-16 units, four UTF-8 bytes: one character


@pytest.mark.parametrize("unit", ["x", EMOJI])
def test_a_text_at_its_limit_passes_and_one_more_is_413(unit):
    _check_text(unit * MAX_TEXT_CHARS, None)
    with pytest.raises(ApiError) as refusal:
        _check_text(unit * (MAX_TEXT_CHARS + 1), None)
    assert (refusal.value.status, refusal.value.param, refusal.value.code) == (413, "input", "input_too_long")


@pytest.mark.parametrize("unit", ["x", EMOJI])
def test_a_voice_description_at_its_limit_passes_and_one_more_is_413(unit):
    _check_text("Hello.", unit * MAX_INSTRUCT_CHARS)
    with pytest.raises(ApiError) as refusal:
        _check_text("Hello.", unit * (MAX_INSTRUCT_CHARS + 1))
    assert (refusal.value.status, refusal.value.param, refusal.value.code) == \
        (413, "instructions", "input_too_long")
