"""The Checker runs the checks it has models for and names the ones it cannot run. Models here
are tiny RANDOM ones (tests/conftest.py): the transcript is noise, the code path real."""
import threading
import time

import pytest
from sounds import RATE, buzz, silence

from engine.audio import asr
from engine.checks import checker as checker_module
from engine.checks.checker import Checker
from engine.checks.verdict import Thresholds
from engine.hub import HubModel


@pytest.fixture
def models(monkeypatch, tiny_whisper, tiny_speaker_model):
    monkeypatch.setattr(asr, "WHISPER", HubModel(tiny_whisper, "test"))
    monkeypatch.setattr(checker_module, "SPEAKER_MODEL", HubModel(tiny_speaker_model, "test"))


@pytest.fixture
def no_models(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(asr, "WHISPER", HubModel("nobody/no-such-asr", "test"))
    monkeypatch.setattr(checker_module, "SPEAKER_MODEL", HubModel("nobody/no-such-speaker", "test"))


def test_every_check_runs_when_the_models_are_here(models):
    v = Checker.load("cpu")
    assert v.unavailable == {}
    take = buzz(1.5)
    verdict = v.check(take, RATE, "Hello there.", Thresholds(), reference=v.embed(take, RATE))
    assert [c.name for c in verdict.checks] == ["words", "voice", "clipping", "pauses", "dropouts"]
    assert verdict.get("voice").score == pytest.approx(1.0, abs=1e-6)  # the take is its own reference
    assert 0 <= verdict.get("words").score  # a random recogniser hears noise: only the path is tested
    assert verdict.skipped == {}


def test_without_models_the_signal_checks_still_run_and_the_rest_say_why(no_models):
    v = Checker.load("cpu")
    assert set(v.unavailable) == {"words", "voice"}
    assert "nobody/no-such-asr" in v.unavailable["words"]
    verdict = v.check(silence(1.0), RATE, "Hello.", Thresholds())
    assert [c.name for c in verdict.checks] == ["clipping", "pauses", "dropouts"]
    assert not verdict.passed and set(verdict.skipped) == {"words", "voice"}


def test_voice_is_skipped_without_a_reference(models):
    verdict = Checker.load("cpu").check(buzz(1.0), RATE, "Hi.", Thresholds(), reference=None)
    assert verdict.get("voice") is None and verdict.skipped["voice"] == "no reference voice to compare with"


def test_checks_of_generations_side_by_side_take_turns():
    """Two job threads checking takes at once: the second waits until the first's recogniser is done (the pipeline
    and the models are not made for concurrent calls)."""
    calling, second_inside, inside, overlapped = threading.Event(), threading.Event(), [], []

    def transcribe(wave, rate):
        inside.append(threading.current_thread().name)
        if len(inside) == 1:  # the first call: hold it while the second one asks
            calling.wait(30)
            overlapped.append(second_inside.wait(0.5))
        else:
            second_inside.set()
        return "hello"

    checker = Checker(transcribe, None)

    def check():
        return checker.check(buzz(1.0), RATE, "hello", Thresholds())

    first = threading.Thread(target=check, name="first")
    first.start()
    while not inside:
        time.sleep(0.01)
    second = threading.Thread(target=lambda: (calling.set(), check()), name="second")
    second.start()
    first.join(30)
    second.join(30)
    assert inside == ["first", "second"] and overlapped == [False]
