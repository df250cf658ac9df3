"""The take-choosing rules: which take is kept, how many are rendered, in how many render calls."""
import pytest

from engine.checks.budget import CheckBudget
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


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedTakes(CheckedTakes):
    """On a stand-in clock: a render call takes `render_s` (its takes are made together), a check `check_s` a take.
    Times are binary fractions, so sums are exact and the limits can be met exactly."""

    def __init__(self, verdicts, render_s: float, check_s: float):
        super().__init__(verdicts)
        self.clock, self.render_s, self.check_s = Clock(), render_s, check_s

    def render(self, offset, n):
        self.clock.now += self.render_s
        return super().render(offset, n)

    def check(self, takes):
        self.clock.now += self.check_s * len(takes)
        return super().check(takes)


@pytest.mark.parametrize("budget_s, checked", [(0.375, [0, 1, 2]), (0.37, [0, 1]), (0.0625, [0])])
def test_best_of_n_checks_its_takes_while_a_check_fits_the_budget(budget_s, checked):
    """Best of 4, a check 0.125 s: within 0.375 s three checks fit exactly (the limit is inclusive), within 0.37 s
    two; the first check runs even when it alone is over. The best of those checked is kept; all four were made."""
    takes = TimedTakes([verdict(0.3, 0.9), verdict(0.1, 0.9), verdict(0.0, 0.9), verdict(0.0, 0.95)],
                       render_s=0.5, check_s=0.125)
    budget = CheckBudget(budget_s, clock=takes.clock)
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=4), budget)
    assert takes.calls == [(0, 4)] and takes.checked == checked and v.attempts == 4
    assert kept == checked[-1]  # each later take scores better here: the last checked is the best checked
    assert v.over_budget == f"{4 - len(checked)} of 4 takes not checked within the {1e3 * budget_s:.0f} ms budget"
    assert v.to_json()["over_budget"] == v.over_budget


def test_the_next_line_of_a_budget_checks_its_first_take_though_a_check_took_longer_than_the_budget():
    """One budget for the lines of an answer: what a check took on one line does not keep the next line's first
    take unchecked."""
    takes = TimedTakes([verdict(0.0, 0.9)] * 4, render_s=0.5, check_s=0.125)
    budget = CheckBudget(0.0625, clock=takes.clock)
    for line in range(2):
        choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=2), budget)
    assert takes.checked == [0, 0]


def test_a_check_is_expected_to_take_what_the_last_one_took_not_the_first():
    """A slow first check (e.g. a recogniser's first call) does not keep the later lines' takes unchecked: line 1's
    check takes the whole 0.25 s budget, line 2's take 0.0625 s each, so all three of line 2's fit."""
    takes = TimedTakes([verdict(0.3, 0.9), verdict(0.1, 0.9), verdict(0.0, 0.9)], render_s=0.5, check_s=0.25)
    budget = CheckBudget(0.25, clock=takes.clock)
    choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=3), budget)
    takes.check_s = 0.0625
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=3), budget)
    assert takes.checked == [0, 0, 1, 2] and kept == 2 and v.over_budget == ""


def test_within_budget_nothing_is_left_out_and_the_verdict_says_nothing():
    takes = TimedTakes([verdict(0.3, 0.9), verdict(0.1, 0.9)], render_s=0.5, check_s=0.125)
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.BEST_OF_N, candidates=2),
                     CheckBudget(0.25, clock=takes.clock))
    assert takes.checked == [0, 1] and kept == 1 and v.over_budget == "" and "over_budget" not in v.to_json()


@pytest.mark.parametrize("budget_s, calls, checked, over", [
    (0.75, [(0, 1), (1, 2)], [0, 1], "1 of 2 retakes not checked within the 750 ms budget"),
    (1.0, [(0, 1), (1, 2)], [0, 1, 2], ""),
    (0.74, [(0, 1)], [0], "no retake: it would not end within the 740 ms budget"),
])
def test_retakes_are_made_and_checked_only_while_they_fit_the_budget(budget_s, calls, checked, over):
    """The first take fails; a retake batch is expected to take as long as the first take (0.5 s) and its first
    check as long as the first check (0.125 s): within 0.75 s exactly that fits, and not the second retake's
    check; within 0.74 s no retake is made."""
    takes = TimedTakes([verdict(0.5, 0.9), verdict(0.4, 0.9), verdict(0.3, 0.9)], render_s=0.5, check_s=0.125)
    kept, v = choose(takes.render, takes.check, CheckPolicy(CheckMode.RETAKE, retries=2),
                     CheckBudget(budget_s, clock=takes.clock))
    assert takes.calls == calls and takes.checked == checked
    assert kept == checked[-1] and v.attempts == len(checked) and v.over_budget == over


def test_a_budget_is_a_positive_time():
    for seconds in (0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            CheckBudget(seconds)


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
