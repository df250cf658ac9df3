"""Speaking numbers and dates: upstream's normalize_text output for the same input, in English, Chinese,
German, French and more; markup kept; a clear error when the package is missing."""
import json
import sys
from pathlib import Path

import pytest
from extras import needs_tn

from engine.errors import TextInputError
from engine.text import normalize
from engine.text.languages import resolve_language
from engine.text.normalize import normalize_available, normalize_text

CASES = json.loads((Path(__file__).parents[1] / "data" / "goldens" / "text.json").read_text("utf-8"))["normalize"]


def test_the_goldens_cover_en_zh_de_fr_and_auto():
    assert {"en", "zh", "de", "fr", None} <= {c["resolved"] for c in CASES}
    assert sum(c["normalized"] != c["text"] for c in CASES) >= 20  # most cases really change


@needs_tn
@pytest.mark.parametrize("case", CASES, ids=[f"{c['language']}:{c['text'][:24]}" for c in CASES])
def test_normalize_text_matches_upstream(case):
    lang = resolve_language(case["language"])
    assert lang == case["resolved"]
    assert normalize_text(case["text"], lang) == case["normalized"]


@needs_tn
def test_markup_and_surrounding_spaces_are_kept():
    spoken = normalize_text("The [laughter] 2 cats ate [B EY1 S] 10 fish.", "en")
    assert "[laughter]" in spoken and "[B EY1 S]" in spoken and " two cats" in spoken
    assert "NI3 HAO3" in normalize_text("NI3 HAO3，我有2个苹果。", "zh")


def test_without_the_package_english_and_chinese_say_how_to_install_it(monkeypatch):
    normalize.wetext_grammar.cache_clear()
    for name in ("tn", "tn.english", "tn.english.normalizer", "tn.chinese", "tn.chinese.normalizer"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if not installed
    try:
        assert not normalize_available()
        with pytest.raises(TextInputError, match=r"pip install 'voicedesk\[tn\]'"):
            normalize_text("I have 2 cats.", "en")
        assert normalize_text("   ", "en") == "   "
    finally:
        normalize.wetext_grammar.cache_clear()



@needs_tn
@pytest.mark.parametrize("language", ["english", "chinese"])
def test_loading_a_grammar_says_nothing_on_the_terminal(language, capfd):
    """WeTextProcessing's own handler said "found existing fst: ..." at INFO for every grammar file it loaded."""
    normalize.wetext_grammar.cache_clear()
    try:
        normalize.wetext_grammar(language)
    finally:
        normalize.wetext_grammar.cache_clear()
    assert capfd.readouterr().err == ""
