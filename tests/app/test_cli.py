"""`launcher.py`: the commands and their help, and `synth` on the tiny checkpoint (audio, RTF, clear errors, saved
voices)."""
import argparse
import importlib.metadata
import os
import stat
from pathlib import Path

import pytest
import soundfile as sf

import launcher
from app.library import VoiceLibrary
from app.storage import AppDirs
from engine.engine import Engine

CLIP = Path(__file__).parents[1] / "data" / "goldens" / "clips" / "voice_6s.wav"
REF_TEXT = "This is a short reference sentence, spoken slowly enough to last about six seconds"


def test_synth_writes_audio_and_prints_rtf(tmp_path, capsys):
    out = tmp_path / "hello.flac"
    rc = launcher.main(["synth", "--demo", "--text", "Hello there.", "--ref", str(CLIP), "--ref-text", REF_TEXT,
                        "--steps", "4", "--seed", "1", "--out", str(out)])
    assert rc == 0
    audio, rate = sf.read(out)
    assert rate == 24000 and len(audio) > 24000 * 0.5
    printed = capsys.readouterr().out
    assert "RTF" in printed and "seed 1" in printed and "demo model" in printed


def test_synth_errors_are_messages_not_tracebacks(tmp_path, capsys):
    assert launcher.main(["synth", "--demo", "--text", "   ", "--out", str(tmp_path / "x.wav")]) == 2
    assert "no text to speak" in capsys.readouterr().err
    assert launcher.main(["synth", "--demo", "--text", "Hi.", "--ref", str(tmp_path / "missing.wav"),
                          "--ref-text", "x", "--out", str(tmp_path / "x.wav")]) == 2
    assert launcher.main(["synth", "--demo", "--text", "Hi.", "--out", str(tmp_path / "x.mp3")]) == 2


def test_synth_pads_fades_and_speaks_numbers_as_asked(tmp_path):
    out = tmp_path / "n.wav"
    base = ["synth", "--demo", "--text", "I have 42 apples.", "--language", "de", "--steps", "2", "--seed", "3"]
    assert launcher.main(base + ["--pad", "0.5", "--fade", "0", "--out", str(out)]) == 0
    assert launcher.main(base + ["--pad", "0", "--fade", "0", "--out", str(tmp_path / "bare.wav")]) == 0
    padded, bare = sf.read(out)[0], sf.read(tmp_path / "bare.wav")[0]
    assert len(padded) == len(bare) + 2 * 12000 and not padded[:12000].any() and not padded[-12000:].any()
    assert (padded[12000:-12000] == bare).all() and bare[0] != 0  # no fade-in: the first sample is not silenced
    assert launcher.main(base + ["--normalize-text", "--out", str(tmp_path / "spoken.wav")]) == 0
    assert launcher.main(base + ["--out", str(tmp_path / "digits.wav")]) == 0
    # "zweiundvierzig" is estimated longer than "42": the spoken text was planned
    assert sf.info(tmp_path / "spoken.wav").frames > sf.info(tmp_path / "digits.wav").frames


def test_synth_with_a_saved_voice(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    engine = Engine.load(launcher.DEMO_MODEL, device="cpu", mode="eager")
    voice = engine.voice_from_clip(CLIP, transcript=REF_TEXT)
    VoiceLibrary.open(AppDirs.default().create()).save("Grandpa Reading", voice)
    out = tmp_path / "v.wav"
    assert launcher.main(["synth", "--demo", "--text", "Hello.", "--voice", "grandpa reading", "--steps", "2",
                          "--out", str(out)]) == 0
    assert out.is_file()


def test_help_lists_every_command_and_the_default_commands_options(capsys):
    with pytest.raises(SystemExit) as done:
        launcher.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    parser = launcher.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert commands and all(name in text for name in commands)
    assert all(option in text for option in ("--demo", "--port", "--no-browser", "--model", "--version"))


def test_version_is_the_installed_package_version(capsys):
    with pytest.raises(SystemExit) as done:
        launcher.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"voicedesk {importlib.metadata.version('voicedesk')}"


@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "steps must be a whole number from 1 to 128, not 0"),
    (["--steps", "200"], "steps must be a whole number from 1 to 128, not 200"),
    (["--pad", "-1"], "pad must be a number from 0 to 10, not -1"),
    (["--fade", "nan"], "fade must be a number"),
    (["--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["--seed", "1234567890123456789012"], "seed must be a whole number from 0 to"),
    (["--duration", "1e9"], "duration must be a number above 0 and at most 600"),
    (["--duration", "-5"], "duration must be"),
    (["--speed", "0"], "speed must be a number from 0.25 to 4"),
    (["--speed", "-1"], "speed must be"),
    (["--speed", "nan"], "speed must be"),
    (["--voice", ""], "--voice is empty"),
    (["--voice", "nobody saved this"], "There is no saved voice"),
    (["--language", "klingon"], "--language: Unknown language 'klingon'"),
    (["--instruct", "femal, robot voice"], "Unknown instruct items: 'femal' (did you mean 'female'?), 'robot voice'."),
    (["--ref", "missing.wav", "--ref-text", "x"], "does not exist"),
    (["--out", "no/such/folder/x.wav"], "the folder no/such/folder does not exist"),
    (["--text", "word " * 10_000 + "!"], "the limit is 50,000"),
])
def test_every_argument_is_checked_before_the_model_loads(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(Engine, "load", None)  # loading the model would be a TypeError, not exit status 2
    given = dict(zip(args[::2], args[1::2]))
    argv = ["synth", "--demo", "--text", given.pop("--text", "Hello."), "--out", given.pop("--out", "x.wav")]
    try:
        rc = launcher.main(argv + [x for pair in given.items() for x in pair])
    except SystemExit as done:  # argparse's own checks
        rc = done.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1, err


def test_the_output_file_follows_the_users_umask(tmp_path):
    out = tmp_path / "shared.wav"
    old = os.umask(0o022)
    try:
        assert launcher.main(["synth", "--demo", "--text", "Hi.", "--steps", "2", "--out", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # not the 0600 of a private temporary file
