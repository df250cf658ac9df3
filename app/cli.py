"""`launcher.py synth`: speak a text in a voice from the command line, write the audio, print the RTF."""
from __future__ import annotations

import sys
from pathlib import Path

from engine.config import GenerationConfig
from engine.errors import VoiceDeskError


def _progress(p) -> None:
    print(f"[{p.stage:8s}] {100 * p.fraction:5.1f} %  {p.message}", file=sys.stderr)


def _voice(engine, args):
    if args.voice:
        from app.library import VoiceLibrary, slugify
        from app.storage import AppDirs

        library = VoiceLibrary.open(AppDirs.default())
        by_name = {e.name.lower(): e.slug for e in library.entries()}
        return library.load_voice(by_name.get(args.voice.lower(), slugify(args.voice)))
    if args.ref:
        return engine.voice_from_clip(args.ref, transcript=args.ref_text)
    return None


def synth(args, model: str | None) -> int:
    from app.storage import write_audio
    from engine.engine import Engine

    out = Path(args.out)
    if out.suffix.lower() not in (".wav", ".flac"):
        print("--out must end in .wav or .flac", file=sys.stderr)
        return 2
    try:
        engine = Engine.load(model, device=args.device, mode=args.mode, progress=_progress)
        voice = _voice(engine, args)
        cfg = GenerationConfig(num_step=args.steps, speed=args.speed, duration=args.duration, seed=args.seed)
        result = engine.synthesize(args.text, voice=voice, instruct=args.instruct, language=args.language, config=cfg)
    except VoiceDeskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write_audio(out, result.audio, result.sample_rate)
    t = result.timings
    demo = "  [demo model: the audio is noise]" if engine.is_demo else ""
    print(f"{out}: {t.audio_s:.2f} s of audio in {t.total_s:.2f} s (RTF {t.rtf:.3f}; generate {t.generate_s:.2f} s, "
          f"decode {t.decode_s:.2f} s), seed {result.seed}, {engine.backend}{demo}")
    return 0
