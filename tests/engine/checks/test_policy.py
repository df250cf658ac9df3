"""The take-choosing rules: which take is kept, how many are rendered, in how many render calls."""
import pytest

from engine.checks.policy import CheckMode, CheckPolicy, choose
from engine.checks.verdict import Check, Verdict


def verdict(wer: float, similarity: float, max_wer: float = 0.2, min_similarity: float = 0.75) -> Verdict:
    return Verdict([Check("words", wer, max_wer, wer <= max_wer), Check("voice", similarity, min_similarity,
                                                                        similarity >= min_similarity)])


class Takes:
    """Takes numbered by seed offset, with preset verdicts; records each render call."""

    def __init__(self, verdicts):
        self.verdicts, self.calls = verdicts, []

    def render(self, offset, n):
        self.calls.append((offset, n))
        return list(range(offset, offset + n))

    def check(self, takes):
        return [self.verdicts[t] for t in takes]


def test_best_of_n_renders_once_and_keeps_the_best_score():
    takes = Takes([verdict(0.3, 0.9), verdict(0.0, 0.7), verdict(0.1, 0.8), verdict(0.0, 0.85)])
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=4))
    assert takes.calls == [(0, 4)]  # one batch of four
    assert kept == 3 and v.passed and v.attempts == 4  # both pass: lowest WER, then the closer voice


def test_best_of_n_prefers_fewer_failed_checks_over_scores():
    takes = Takes([verdict(0.0, 0.5), verdict(0.15, 0.8)])
    kept, _ = choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=2))
    assert kept == 1


class CheckedTakes(Takes):
    """Also records which takes were checked."""

    def __init__(self, verdicts):
        super().__init__(verdicts)
        self.checked = []

    def check(self, takes):
        self.checked += takes
        return super().check(takes)


def test_retake_batches_the_retakes_and_keeps_the_first_that_passes():
    takes = CheckedTakes([verdict(0.5, 0.9), verdict(0.1, 0.9), verdict(0.0, 0.95)])
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.RETAKE, retries=2))
    assert takes.calls == [(0, 1), (1, 2)]  # the first alone, then both retakes in one batch
    assert kept == 1 and v.attempts == 2 and takes.checked == [0, 1]  # as one at a time: the better third unseen


def test_retake_renders_no_retake_when_the_first_passes():
    takes = Takes([verdict(0.1, 0.9), verdict(0.0, 0.95)])
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.RETAKE, retries=2))
    assert takes.calls == [(0, 1)] and kept == 0 and v.attempts == 1


def test_retake_gives_up_after_the_retries_and_keeps_the_least_bad():
    takes = Takes([verdict(0.5, 0.9), verdict(0.3, 0.9), verdict(0.6, 0.9), verdict(0.0, 0.9)])
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.RETAKE, retries=2))
    assert takes.calls == [(0, 1), (1, 2)]  # never the fourth
    assert kept == 1 and not v.passed and v.attempts == 3


def test_check_only_renders_one_take_and_keeps_it_failing():
    takes = Takes([verdict(0.9, 0.1), verdict(0.0, 0.9)])
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.CHECK))
    assert takes.calls == [(0, 1)] and kept == 0 and not v.passed


def test_badge_names_the_failing_part():
    v = Verdict([Check("words", 0.0, 0.2, True), Check("voice", 0.82, 0.75, True),
                 Check("clipping", 0.0, 0.001, True), Check("pauses", 2.1, 1.5, False, "2.1 s of silence at 3.0 s")])
    assert v.badge() == "words ok · voice 0.82 · pause 2.1 s"
    assert v.problems() == "pauses: 2.1 s of silence at 3.0 s"
    assert v.to_json()["checks"]["voice"]["score"] == 0.82


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError):
        CheckPolicy(CheckMode.BEST_OF_N, candidates=0)
    assert CheckPolicy("retake").mode is CheckMode.RETAKE
