"""`launcher.py synth`: speak a text in a voice from the command line, write the audio, print the RTF.

Every argument is checked before the model loads (a mistake costs a second, not a generation), and
every mistake ends with one line on stderr and exit status 2."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.config import GenerationConfig
from engine.errors import TextInputError, VoiceDeskError


def _progress(p) -> None:
    print(f"[{p.stage:8s}] {100 * p.fraction:5.1f} %  {p.message}", file=sys.stderr)


def _saved_voice(name: str):
    from app.library import VoiceLibrary
    from app.storage import AppDirs

    if not name.strip():
        raise TextInputError("--voice is empty: give the name of a saved voice (`voicedesk voices` lists them).")
    return VoiceLibrary.open(AppDirs.default()).find_voice(name)


def _check_language(language: str | None) -> None:
    from engine.text.languages import UnknownLanguageError, resolve_language

    try:
        resolve_language(language, strict=True)
    except UnknownLanguageError as err:
        raise TextInputError(f"--language: {err} Or leave it out.") from None


def _check_out(out: Path) -> None:
    if out.suffix.lower() not in (".wav", ".flac"):
        raise TextInputError(f"--out must end in .wav or .flac, not {out.name!r}.")
    folder = out.parent
    if not folder.is_dir():
        raise TextInputError(f"--out: the folder {folder} does not exist.")
    if not os.access(folder, os.W_OK):
        raise TextInputError(f"--out: the folder {folder} is read-only.")


def _checked_request(args):
    """(config, saved voice or None), after checking every argument that can be checked without the model."""
    from engine.audio.io import load_clip
    from engine.text.clean import require_text
    from engine.text.instruct import canonical_instruct
    from engine.text.limits import check_request

    _check_out(Path(args.out))
    config = GenerationConfig(num_step=args.steps, speed=args.speed, duration=args.duration, seed=args.seed,
                              pad_duration=args.pad, fade_duration=args.fade, normalize_text=args.normalize_text)
    require_text(args.text)
    check_request(args.text, args.ref_text, args.instruct)
    canonical_instruct(args.instruct)
    _check_language(args.language)
    if args.voice is not None and args.ref:
        raise TextInputError("Give --voice or --ref, not both.")
    if args.ref:
        load_clip(args.ref)
    return config, (_saved_voice(args.voice) if args.voice is not None else None)


def _write_as_user(out: Path, audio, rate: int) -> None:
    """Write atomically, then give the file the permissions of any file the user creates (their umask)."""
    from app.storage import write_audio

    write_audio(out, audio, rate)
    umask = os.umask(0)
    os.umask(umask)
    out.chmod(0o666 & ~umask)


def synth(args, model: str | None) -> int:
    from engine.engine import Engine

    out = Path(args.out)
    try:
        config, voice = _checked_request(args)
        engine = Engine.load(model, device=args.device, mode=args.mode, progress=_progress)
        if args.ref:
            voice = engine.voice_from_clip(args.ref, transcript=args.ref_text)
        result = engine.synthesize(args.text, voice=voice, instruct=args.instruct, language=args.language,
                                   config=config)
        _write_as_user(out, result.audio, result.sample_rate)
    except VoiceDeskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl+C: the file is written whole or not at all (write_audio is atomic)
        print("Stopped: nothing was written.", file=sys.stderr)
        return 130
    t = result.timings
    demo = "  [demo model: the audio is noise]" if engine.is_demo else ""
    print(f"{out}: {t.audio_s:.2f} s of audio in {t.total_s:.2f} s (RTF {t.rtf:.3f}; generate {t.generate_s:.2f} s, "
          f"decode {t.decode_s:.2f} s), seed {result.seed}, {engine.backend}{demo}")
    return 0
