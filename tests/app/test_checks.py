"""The app side of the take checks without a server: settings -> policy, the badge and the History
summary from stored verdicts, which models are missing."""
import json

from app.checks import CheckService, badge_html, policy_from, summary
from app.settings import Settings
from engine.audio import asr
from engine.checks import checker as checker_module
from engine.checks.policy import CheckMode
from engine.checks.verdict import Check, Verdict
from engine.hub import HubModel


def part(*checks: Check, attempts: int = 1, skipped=None) -> dict:
    return Verdict(list(checks), dict(skipped or {}), attempts).to_json()


GOOD = part(Check("voice", 0.82, 0.75, True), Check("clipping", 0.0, 0.001, True), attempts=3)
BAD = part(Check("words", 0.5, 0.2, False, "missing 'brown fox'"), Check("pauses", 0.1, 1.5, True))


def test_settings_make_the_policy_and_bad_values_fall_back(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"check_mode": "best_of_n", "check_candidates": 4, "check_max_wer": 0.1,
                                "check_min_similarity": 7.0, "check_retries": "two"}))
    settings, problems = Settings.check(path)
    policy = policy_from(settings)
    assert policy.mode is CheckMode.BEST_OF_N and policy.candidates == 4 and policy.thresholds.max_wer == 0.1
    assert policy.thresholds.min_similarity == 0.75 and policy.retries == 2  # out of range / wrong type: defaults
    assert len(problems) == 2
    path.write_text(json.dumps({"check_mode": "sometimes"}))
    assert Settings.load(path).check_mode == "off"


def test_badge_lines_name_the_failing_part_and_the_skipped_checks():
    html = badge_html([GOOD, BAD], {"words": "the speech recogniser is not on this computer"})
    assert "Part 1: voice 0.82 · signal ok · 3 takes" in html and 'data-passed="true"' in html
    assert "Part 2: words 50% wrong · signal ok — words: missing &#x27;brown fox&#x27;" in html
    assert "Words not checked: the speech recogniser is not on this computer" in html
    assert badge_html([]) == ""


def test_history_summary():
    assert summary(None) == "—" and summary({"parts": []}) == "—"
    assert summary({"parts": [GOOD, GOOD]}) == "ok"
    assert summary({"parts": [GOOD, BAD]}) == "1/2 failed: words"


def test_the_summary_says_what_was_checked_when_models_are_missing():
    """Best of N with neither model here: only the signal was checked, and the column said 'ok'."""
    missing = {"words": "the speech recogniser is not on this computer", "voice": "no speaker model"}
    signal_only = part(Check("clipping", 0.0, 0.001, True), Check("pauses", 0.2, 1.5, True), attempts=3,
                       skipped=missing)
    assert summary({"parts": [signal_only], "skipped": missing}) == "signal ok; voice, words not checked"
    assert summary({"parts": [signal_only]}) == "signal ok; voice, words not checked"  # as the Studio stores it
    voice_too = part(Check("voice", 0.8, 0.75, True), Check("pauses", 0.2, 1.5, True), skipped={"words": "x"})
    assert summary({"parts": [voice_too]}) == "voice, signal ok; words not checked"
    assert summary({"parts": [BAD], "skipped": {"voice": "x"}}) == "1/1 failed: words; voice not checked"


def test_missing_models_are_found_without_the_network(monkeypatch, tmp_path, tiny_speaker_model):
    monkeypatch.setattr(asr, "WHISPER", HubModel(str(tmp_path / "nowhere"), "test"))
    monkeypatch.setattr(checker_module, "SPEAKER_MODEL", HubModel(tiny_speaker_model, "test"))
    service = CheckService(lambda: "cpu")
    assert list(service.missing()) == ["words"]
    assert set(service.checker().unavailable) == {"words"} and service.checker() is service.checker()
