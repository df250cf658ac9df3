"""Take checks a stranger's planted bugs got past: a retake uses new seeds (from 0 again past the largest), best of N
breaks ties by the voice, a word error rate exactly at the threshold passes, a text is scored by its own language's
rules, and short natural pauses are not dropouts."""
from types import SimpleNamespace

import numpy as np

from engine.checks.policy import CheckMode, CheckPolicy, choose
from engine.checks.signal import check_gaps
from engine.checks.takes import Checks, checked_take
from engine.checks.verdict import Check, Thresholds, Verdict
from engine.checks.words import check_words, tokens
from engine.config import MAX_SEED, GenerationConfig
from engine.request import SpeechRequest

RATE = 24000


def verdict(*checks: Check) -> Verdict:
    return Verdict(list(checks))


def test_a_retake_on_failure_renders_new_seeds():
    asked = []

    def render(offset, n):
        asked.append((offset, n))
        return [f"take seeded +{offset + i}" for i in range(n)]

    def check(takes):
        return [verdict(Check("words", 0.0 if take.endswith("+2") else 0.5, 0.2, take.endswith("+2")))
                for take in takes]

    take, kept = choose(render, check, CheckPolicy(CheckMode.RETAKE, retries=2))
    assert asked == [(0, 1), (1, 2)]  # the line's seed, then the next two: never the failed seed again
    assert take == "take seeded +2" and kept.passed and kept.attempts == 3


def test_best_of_n_breaks_a_tie_by_voice_similarity():
    takes = ["first", "second", "third"]
    verdicts = [verdict(Check("words", 0.0, 0.2, True), Check("voice", score, 0.75, True))
                for score in (0.80, 0.91, 0.85)]
    take, kept = choose(lambda offset, n: takes[:n], lambda t: verdicts, CheckPolicy(CheckMode.BEST_OF_N, candidates=3))
    assert take == "second" and kept.attempts == 3


def test_a_word_error_rate_exactly_at_the_threshold_passes():
    at = check_words("the cat sat on mats", "the cat sat on", max_wer=0.2, language="en")  # one word in five
    assert at.score == 0.2 and at.passed
    assert not check_words("the cat sat on mats", "the cat sat", max_wer=0.2, language="en").passed


def test_a_text_is_scored_by_its_own_languages_rules():
    assert tokens("one two three", "en") == ["123"]  # English rules fold number words
    assert tokens("one two three", "de") == ["one", "two", "three"]  # German ones do not, ASCII or not
    assert tokens("hmm ich weiss nicht", "de") == ["hmm", "ich", "weiss", "nicht"]
    assert tokens("one two three", None) == ["123"]  # no language given: English rules for ASCII text


def speech_with_gap(gap_s: float, fade_s: float) -> np.ndarray:
    """A 180 Hz buzz, a gap of silence, the buzz again; `fade_s`: how long the sound fades into the gap."""
    t = np.arange(int(0.8 * RATE)) / RATE
    voiced = (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)
    fade = np.ones_like(voiced)
    n = int(fade_s * RATE)
    if n:
        fade[-n:] = np.linspace(1, 0, n) ** 3
    return np.concatenate([voiced * fade, np.zeros(int(gap_s * RATE), np.float32), voiced * fade[::-1]])


def test_a_short_natural_pause_is_not_a_dropout():
    natural = {c.name: c for c in check_gaps(speech_with_gap(0.15, fade_s=0.12), RATE, Thresholds())}
    assert natural["dropouts"].passed and natural["dropouts"].score == 0 and natural["pauses"].passed
    cut = {c.name: c for c in check_gaps(speech_with_gap(0.15, fade_s=0.0), RATE, Thresholds())}
    assert not cut["dropouts"].passed and cut["dropouts"].score == 1  # the control: a hard cut is one


def test_a_retake_past_the_largest_seed_starts_again_from_0():
    """checked_take's retake of a line seeded MAX_SEED renders seed 0 (engine/config.py offset_seed)."""
    seeds = []

    class Rendering:
        def render(self, request, n=1, cancel=None):
            seeds.append(request.config.seed)
            return [SimpleNamespace(audio=np.zeros(RATE, np.float32), sample_rate=RATE)] * n

    class Failing:
        def check(self, *args, **kwargs):
            return verdict(Check("words", 0.5, 0.2, False))

    request = SpeechRequest(text="A line.", config=GenerationConfig(seed=MAX_SEED))
    checks = Checks(CheckPolicy(CheckMode.RETAKE, retries=1), Failing())
    checked_take(Rendering(), request, cancel=None, checks=checks, reference=None)
    assert seeds == [MAX_SEED, 0]
