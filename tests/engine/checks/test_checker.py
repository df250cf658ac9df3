"""The Checker runs the checks it has models for and names the ones it cannot run. Models here
are tiny RANDOM ones (tests/conftest.py): the transcript is noise, the code path real."""
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
