"""Target-length estimate: upstream goldens, and properties of the character-weight rule."""
import json
import random
from pathlib import Path

import pytest

from engine.text.duration import (
    FALLBACK_REF_FRAMES,
    FALLBACK_REF_TEXT,
    char_weight,
    estimate_frames,
    estimate_target_tokens,
    plan_target_tokens,
    text_weight,
    tokens_for_duration,
)

GOLDENS = json.loads((Path(__file__).parents[1] / "data" / "goldens" / "text.json").read_text("utf-8"))
GOLDEN_REFS = GOLDENS["ref_for_estimates"]  # name -> {ref_text, ref_frames}
REF_TEXT = "The quick brown fox jumps over the lazy dog."


def test_char_weights_match_upstream():
    expected = GOLDENS["char_weights"]
    assert {ch: char_weight(ch) for ch in expected} == expected


@pytest.mark.parametrize("case", GOLDENS["strings"], ids=lambda case: repr(case["text"][:24]))
def test_estimates_match_upstream(case):
    text = case["text"]
    assert text_weight(text) == case["weight"]
    for name, ref in GOLDEN_REFS.items():
        assert estimate_frames(text, ref["ref_text"], ref["ref_frames"]) == case[f"estimate_{name}"]
    for key, tokens in case["target_tokens"].items():
        ref_name, speed = key.split(".speed_")
        ref = GOLDEN_REFS.get(ref_name, {"ref_text": None, "ref_frames": None})  # "no_ref": none
        assert estimate_target_tokens(text, ref["ref_text"], ref["ref_frames"], float(speed)) == tokens, key


@pytest.mark.parametrize(
    "heavier, lighter",
    [("中", "a"), ("5", "中"), ("한", "あ"), ("あ", "क"), ("क", "ا"), ("a", "!"), ("🎉", " "), (" ", "\u0301")],
)
def test_scripts_are_ordered_by_speaking_time(heavier, lighter):
    assert char_weight(heavier) > char_weight(lighter)


def test_combining_marks_and_tatweel_weigh_nothing():
    assert text_weight("e\u0301") == text_weight("e")
    assert text_weight("مــرحبا") == text_weight("مرحبا")


def test_without_a_reference_the_fallback_rate_is_used():
    text = "Some text to say, with a number 42."
    fallback = estimate_target_tokens(text, FALLBACK_REF_TEXT, FALLBACK_REF_FRAMES)
    assert estimate_target_tokens(text) == fallback
    assert estimate_target_tokens(text, REF_TEXT, None) == fallback
    assert estimate_target_tokens(text, "", 100) == fallback


def test_the_reference_rate_scales_the_estimate():
    text = "word " * 100
    slow = estimate_target_tokens(text, REF_TEXT, 200)
    fast = estimate_target_tokens(text, REF_TEXT, 100)
    assert abs(slow - 2 * fast) <= 2


def test_estimates_grow_with_the_text():
    rng = random.Random(0)
    alphabet = "ab 中あ,5🎉\u0301"
    text = ""
    previous = 0
    for _ in range(300):
        text += rng.choice(alphabet)
        tokens = estimate_target_tokens(text, REF_TEXT, 90)
        assert tokens >= previous
        previous = tokens


def test_short_estimates_are_stretched_and_long_ones_are_linear():
    linear = text_weight("Hi.") / (text_weight(REF_TEXT) / 100)  # ~ 8 frames
    assert estimate_target_tokens("Hi.", REF_TEXT, 100) > 2 * linear
    long_text = "A longer sentence that takes well over two seconds to say out loud."
    linear = text_weight(long_text) / (text_weight(REF_TEXT) / 100)
    assert linear > 50 and estimate_target_tokens(long_text, REF_TEXT, 100) == int(linear)


def test_speed_divides_the_estimate():
    text = "A sentence of a reasonable length for the speed test, long enough to be linear."
    normal = estimate_target_tokens(text, REF_TEXT, 100)
    assert abs(estimate_target_tokens(text, REF_TEXT, 100, speed=2.0) - normal / 2) <= 1
    assert estimate_target_tokens(text, REF_TEXT, 100, speed=0.5) >= 2 * normal
    for ignored in (None, 1.0, 0.0, -1.0):
        assert estimate_target_tokens(text, REF_TEXT, 100, speed=ignored) == normal


def test_at_least_one_frame():
    assert estimate_target_tokens("", REF_TEXT, 100) == 1
    assert estimate_target_tokens("text", REF_TEXT, 0) == 1
    assert estimate_target_tokens("text", "\u0301", 100) == 1  # a reference that weighs nothing


@pytest.mark.parametrize("seconds, frames", [(0.0, 1), (0.001, 1), (0.999, 24), (2.0, 50), (10.5, 262)])
def test_fixed_duration(seconds, frames):
    assert tokens_for_duration(seconds) == frames


def test_plan_with_a_fixed_duration_turns_it_into_a_speed_for_the_chunks():
    text = "word " * 300
    natural = estimate_target_tokens(text, REF_TEXT, 100)
    frames, speed = plan_target_tokens(text, REF_TEXT, 100, speed=3.0, duration=20.0)
    assert frames == 500
    assert speed == natural / 500


def test_plan_without_a_duration_keeps_the_speed():
    text = "word " * 300
    assert plan_target_tokens(text, REF_TEXT, 100, speed=1.5) == (
        estimate_target_tokens(text, REF_TEXT, 100, speed=1.5), 1.5)
    assert plan_target_tokens(text) == (estimate_target_tokens(text), 1.0)
