"""The calibration script end to end on a made-up corpus (two 'speakers': buzzes at two pitches) with
the tiny RANDOM models: the words and voice figures are meaningless here, the signal ones are not
(every damage is detected, clean clips pass), and the equal error rate is checked by hand."""
import json

import pytest
import soundfile as sf
from sounds import RATE, buzz

from engine.audio import asr
from engine.checks import checker as checker_module
from engine.hub import HubModel
from tools.calibrate_checks import damaged_text, equal_error, main


def test_equal_error_rate_by_hand():
    same, different = [0.9, 0.8, 0.7, 0.4], [0.3, 0.5, 0.75, 0.2]
    # at 0.7: reject 1 of 4 same (0.4), accept 1 of 4 different (0.75): both 25 %
    assert equal_error(same, different) == (0.25, 0.7)
    assert equal_error([0.9, 0.8], [0.1, 0.2]) == (0.0, 0.8)


def test_damaged_text_drops_and_repeats_a_word():
    assert damaged_text("one two three four") == "one three four four"


def test_report_on_a_tiny_corpus(tmp_path, monkeypatch, tiny_whisper, tiny_speaker_model):
    monkeypatch.setattr(asr, "WHISPER", HubModel(tiny_whisper, "test"))
    monkeypatch.setattr(checker_module, "SPEAKER_MODEL", HubModel(tiny_speaker_model, "test"))
    for speaker, f0 in (("low", 120.0), ("high", 220.0)):
        for n, seconds in enumerate((1.5, 2.0)):
            folder = tmp_path / "corpus" / speaker
            folder.mkdir(parents=True, exist_ok=True)
            sf.write(folder / f"clip{n}.wav", buzz(seconds, f0=f0), RATE)
            (folder / f"clip{n}.txt").write_text("a made up line of text")
    out = tmp_path / "report.json"
    main([str(tmp_path / "corpus"), "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["clips"] == 4 and report["speakers"] == 2
    assert len(report["voice"]["same_speaker"]) == 2 and len(report["voice"]["different_speaker"]) == 4
    assert report["signal"] == {"pass_rate_clean": 1.0, "fail_rate_pause": 1.0, "fail_rate_dropout": 1.0,
                                "fail_rate_clipping": 1.0}


def test_refuses_without_the_real_models(tmp_path, monkeypatch):
    monkeypatch.setattr(asr, "WHISPER", HubModel(str(tmp_path / "absent"), "test"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit, match="The real models are needed"):
        main([str(tmp_path)])
