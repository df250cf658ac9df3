"""Language ids and names: resolution as upstream, and the dropdown list."""
import json
import warnings
from pathlib import Path

import pytest

from engine.errors import TextInputError
from engine.text.languages import (
    UnknownLanguageError,
    UnknownLanguageWarning,
    language_choices,
    language_ids,
    language_name,
    resolve_language,
)

TABLE = json.loads((Path(__file__).parents[2] / "engine" / "text" / "data" / "languages.json").read_text("utf-8"))
GOLDENS = Path(__file__).parents[1] / "data" / "goldens"


def test_the_table_is_upstreams():
    upstream = json.loads((GOLDENS / "languages.json").read_text("utf-8"))
    assert TABLE == {lang_id: entry["display_name"] for lang_id, entry in upstream.items()}
    assert all(TABLE[lang_id].lower() == entry["name"] for lang_id, entry in upstream.items())


def test_resolution_matches_upstream():
    cases = json.loads((GOLDENS / "text.json").read_text("utf-8"))["languages"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownLanguageWarning)
        assert [resolve_language(case["input"]) for case in cases] == [case["resolved"] for case in cases]


def test_the_table_has_upstreams_646_languages():
    assert len(TABLE) == 646 == len(language_ids())
    assert len({name.lower() for name in TABLE.values()}) == 646


def test_every_id_resolves_to_itself():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(resolve_language(lang_id) == lang_id for lang_id in TABLE)


def test_every_name_resolves_in_any_case():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lang_id, name in TABLE.items():
            for spelling in (name, name.lower(), name.upper()):
                assert resolve_language(spelling) == lang_id


@pytest.mark.parametrize("no_hint", [None, "None", "none", "auto", "Auto"])
def test_no_language_hint(no_hint):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_language(no_hint) is None


@pytest.mark.parametrize("unknown", ["Klingon", "EN", "zh-CN", "English ", ""])
def test_unknown_languages_warn_and_fall_back_to_none(unknown):
    with pytest.warns(UnknownLanguageWarning, match="not recognised"):
        assert resolve_language(unknown) is None


def test_a_language_that_is_not_a_string_is_refused():
    with pytest.raises(TextInputError):
        resolve_language(1)


def test_language_choices_for_the_dropdown():
    choices = language_choices()
    assert choices[0] == ("Auto", "auto") and resolve_language(choices[0][1]) is None
    labels = [label for label, _ in choices[1:]]
    assert labels == sorted(labels, key=str.casefold)
    assert {value for _, value in choices[1:]} == set(TABLE)
    assert ("English", "en") in choices and ("Chinese", "zh") in choices


def test_language_name():
    assert language_name("en") == "English"
    assert language_name(None) == "Auto"


@pytest.mark.parametrize("language, expected", [("en", "en"), ("ENGLISH", "en"), ("auto", None), (None, None)])
def test_strict_resolution_gives_what_the_lenient_one_does_for_known_languages(language, expected):
    assert resolve_language(language, strict=True) == expected


def test_strict_resolution_refuses_an_unknown_language_with_advice():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # strict never warns: it refuses
        with pytest.raises(UnknownLanguageError, match="Unknown language 'EN'.*'English'"):
            resolve_language("EN", strict=True)  # ids are exact, as upstream
