"""The words check against hand-made transcripts: WER, normalisation, and naming what went wrong."""
import pytest

from engine.checks.words import align, check_words, score_words, tokens

TEXT = "The quick brown fox jumps over the lazy dog."


def test_wer_counts_deletions_insertions_and_substitutions():
    s = score_words(TEXT, "the quick fox jumps over the the lazy cat")
    assert (s.missing, s.extra, s.wrong) == (["brown"], ["the"], [("dog", "cat")])
    assert s.words == 9 and s.wer == pytest.approx(3 / 9)


def test_the_same_normalisation_on_both_sides():
    assert score_words(TEXT, "THE QUICK, BROWN FOX... jumps over the lazy dog!").wer == 0
    assert score_words("I have twenty-five apples.", "I have 25 apples").wer == 0  # numbers
    assert score_words("It's three o'clock, Mr. Smith.", "it is 3 o'clock mister smith").wer == 0


def test_scripts_without_spaces_compare_characters():
    assert tokens("你好，世界。") == ["你", "好", "世", "界"]
    s = score_words("你好，世界。", "你好世")
    assert s.missing == ["界"] and s.wer == pytest.approx(1 / 4)


def test_other_languages_keep_their_letters():
    assert tokens("Ça va? Très bien!", "fr") == ["ça", "va", "très", "bien"]


def test_alignment_is_a_minimum_edit():
    assert align(["a", "b", "c"], ["a", "c", "c"]) == [("a", "a"), ("b", "c"), ("c", "c")]  # 1 edit, not 2
    assert align(["a", "b"], ["a", "x", "b"]) == [("a", "a"), (None, "x"), ("b", "b")]
    assert align([], ["x"]) == [(None, "x")] and align(["x"], []) == [("x", None)]


def test_check_passes_under_the_threshold_and_names_the_failing_words():
    ok = check_words(TEXT, "the quick brown fox jumps over the lazy dog", max_wer=0.2)
    assert ok.passed and ok.score == 0 and ok.detail == ""
    bad = check_words(TEXT, "the quick jumps over the lazy dog", max_wer=0.2)
    assert not bad.passed and bad.score == pytest.approx(2 / 9)
    assert "missing 'brown fox'" in bad.detail
    assert check_words(TEXT, "the quick jumps over the lazy dog", max_wer=0.25).passed
