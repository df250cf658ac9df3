"""Voice-design instructs: canonical forms, language switching and errors, as upstream."""
import json
import re
from pathlib import Path

import pytest

from engine.errors import TextInputError
from engine.text.instruct import (
    ATTRIBUTES,
    CATEGORIES,
    canonical_instruct,
    choices,
    compose_instruct,
)

GOLDENS = json.loads((Path(__file__).parents[1] / "data" / "goldens" / "text.json").read_text("utf-8"))


@pytest.mark.parametrize("case", GOLDENS["instruct_valid"], ids=lambda c: f"{c['instruct']}|{c['use_zh']}")
def test_canonical_forms_match_upstream(case):
    assert canonical_instruct(case["instruct"], use_zh=case["use_zh"]) == case["resolved"]


@pytest.mark.parametrize("case", GOLDENS["instruct_invalid"], ids=lambda c: c["instruct"])
def test_errors_match_upstream_in_one_line(case):
    """Refused where upstream refuses, naming the same items and suggestions, in one line (upstream: eight)."""
    with pytest.raises(TextInputError) as err:
        canonical_instruct(case["instruct"], use_zh=case["use_zh"])
    message = str(err.value)
    assert "\n" not in message
    for raw, hint in re.findall(r"^  '(.*)' -> '.*' \((.*)\)$", case["error"], re.MULTILINE) or [(None, None)]:
        if raw is None:  # a conflict or dialect+accent: upstream's words, already one line
            assert message == case["error"]
            continue
        suggestion = re.search(r"did you mean '(.*)'\?", hint)
        assert f"'{raw.strip()}'" + (f" (did you mean '{suggestion[1]}'?)" if suggestion else "") in message


def test_vocabulary_matches_upstream():
    vocabulary = GOLDENS["instruct_vocabulary"]
    assert sorted(a.english for a in ATTRIBUTES if a.english) == vocabulary["valid_en"]
    assert sorted(a.chinese for a in ATTRIBUTES if a.chinese) == vocabulary["valid_zh"]
    assert {a.english: a.chinese for a in ATTRIBUTES if a.english and a.chinese} == vocabulary["en_to_zh"]
    ours = [sorted(f for a in ATTRIBUTES if a.category == c for f in (a.english, a.chinese) if f) for c in CATEGORIES]
    assert ours == vocabulary["mutually_exclusive"]


def test_no_instruct():
    assert canonical_instruct(None) is None
    assert canonical_instruct("  ") is None


def test_english_items_are_lowercased_and_joined_with_comma_space():
    assert canonical_instruct("Female,LOW PITCH ，  Whisper,") == "female, low pitch, whisper"


def test_chinese_text_turns_items_into_chinese():
    assert canonical_instruct("female, low pitch", use_zh=True) == "女，低音调"
    assert canonical_instruct("女,低音调") == "female, low pitch"


def test_a_dialect_forces_chinese_and_an_accent_forces_english():
    assert canonical_instruct("female, 四川话") == "女，四川话"
    assert canonical_instruct("女，british accent", use_zh=True) == "female, british accent"


def test_every_attribute_round_trips():
    for a in ATTRIBUTES:
        if a.english:
            assert canonical_instruct(a.english.upper()) == a.english
        if a.chinese:
            assert canonical_instruct(a.chinese, use_zh=True) == a.chinese
        if a.english and a.chinese:
            assert canonical_instruct(a.english, use_zh=True) == a.chinese
            assert canonical_instruct(a.chinese) == a.english


def test_unknown_items_are_refused_with_the_valid_list_and_a_suggestion():
    with pytest.raises(TextInputError) as err:
        canonical_instruct("femal, robot voice")
    message = str(err.value)
    assert message.startswith("Unknown instruct items: 'femal' (did you mean 'female'?), 'robot voice'. ")
    for a in ATTRIBUTES:
        assert (a.english or a.chinese) in message


def test_a_dialect_and_an_accent_together_are_refused():
    with pytest.raises(TextInputError, match="Cannot mix Chinese dialect and English accent"):
        canonical_instruct("河南话, american accent")


@pytest.mark.parametrize("conflict", ["male, female", "child, 老年", "british accent, indian accent",
                                      "河南话，四川话", "whisper, whisper"])
def test_two_items_of_one_category_are_refused(conflict):
    with pytest.raises(TextInputError, match="Conflicting instruct items within the same category"):
        canonical_instruct(conflict)


def test_ui_choices_cover_every_attribute():
    values = [value for category in CATEGORIES for _, value in choices(category)]
    assert sorted(values) == sorted(a.value for a in ATTRIBUTES)
    assert all(canonical_instruct(value) is not None for value in values)
    assert ("Sichuan dialect (四川话)", "四川话") in choices("dialect")


def test_compose_instruct_from_dropdowns():
    assert compose_instruct(["female", None, "", "四川话"]) == "female, 四川话"
    assert canonical_instruct(compose_instruct(["female", None, "四川话"])) == "女，四川话"
    assert compose_instruct([None, ""]) is None
