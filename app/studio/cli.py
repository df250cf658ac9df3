"""`voicedesk render script.md --out book.m4b`: render a script (or a .txt, .srt or .epub) with a progress
bar, then write the book and an SRT beside it.

The render is kept as a Studio project named after the script file, so running the same command again
after a crash or Ctrl+C resumes where it stopped (and the app's Studio tab can open it)."""
from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

from engine.errors import VoiceDeskError

from .export import SUFFIXES, export
from .importers import import_file
from .parse import parse_script
from .plan import plan_cues
from .project import Projects
from .render import Progress, pending, render_lines


def render(args, model: str | None) -> int:
    from tqdm import tqdm

    from engine.engine import Engine

    from ..library import VoiceLibrary
    from ..storage import AppDirs

    script_path, out = Path(args.script), Path(args.out)
    if out.suffix.lower() not in SUFFIXES:
        print(f"--out must end in {', '.join(SUFFIXES)}", file=sys.stderr)
        return 2
    dirs = AppDirs.default().create()
    library = VoiceLibrary.open(dirs)
    try:
        text = import_file(script_path)
        script = parse_script(text)
        saved = [entry.name for entry in library.entries()]
        if args.voice is not None and args.voice.casefold() not in {name.casefold() for name in saved}:
            print(f"error: --voice: there is no saved voice '{args.voice}' (`voicedesk voices` lists them)",
                  file=sys.stderr)
            return 2
        cues = plan_cues(script, args.voice, saved)
        project = Projects(dirs.studio).open_or_create(_project_name(script_path))
        project.update_settings(narrator=args.voice, language=args.language, loudness_lufs=args.loudness,
                                steps=args.steps)
        project.set_script(text, keep={cue.key for cue in cues})
        todo = pending(project, cues)
        engine = Engine.load(model, device=args.device, mode=args.mode) if todo else None
    except VoiceDeskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{script_path.name}: {len(cues)} lines in {len(script.chapters)} chapter(s), {len(todo)} to render "
          f"(project '{project.name}')", file=sys.stderr)
    progress = Progress.of(todo)
    failed, stopped = [], None
    started = time.perf_counter()
    bar = tqdm(total=len(cues), initial=len(cues) - len(todo), unit="line", file=sys.stderr, dynamic_ncols=True)
    try:
        for event in render_lines(engine, project, todo, library.find_voice, speak_numbers=args.normalize_text):
            progress.add(event)
            if event.kind == "stopped":
                stopped = event.error
            if event.kind == "failed":
                failed.append(event)
                tqdm.write(f"line {event.cue.line.number} failed: {event.error}", file=sys.stderr)
            if event.warning:
                tqdm.write(f"line {event.cue.line.number}: {event.warning}", file=sys.stderr)
            if event.kind in ("done", "failed"):
                bar.update(1)
                left = progress.seconds_left
                bar.set_postfix_str(f"RTF {progress.rtf:.3f}, about {left:.0f} s left" if left is not None else "")
    except KeyboardInterrupt:
        bar.close()
        print("Stopped. Run the same command again to go on from here.", file=sys.stderr)
        return 130
    bar.close()
    if progress.done:
        wall = time.perf_counter() - started
        print(f"rendered {progress.done} lines: {progress.audio_s:.1f} s of audio in {wall:.1f} s "
              f"({progress.render_s:.1f} s generating, RTF {progress.rtf:.4f})", file=sys.stderr)
    if stopped:
        print(f"error: {stopped.replace('rendering again', 'running the same command again')}", file=sys.stderr)
        return 1
    if failed:
        print(f"{len(failed)} line(s) failed; run the same command again to retry them.", file=sys.stderr)
        return 1
    try:
        written = export(project, script, cues, out, per_chapter=args.per_chapter)
    except VoiceDeskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    demo = "  [demo model: the audio is noise]" if engine is not None and engine.is_demo else ""
    for path in written:
        print(f"{path} + {path.with_suffix('.srt').name}{demo}")
    return 0


def _project_name(script_path: Path) -> str:
    where = hashlib.sha256(str(script_path.resolve()).encode()).hexdigest()[:6]
    return f"{script_path.name} ({where})"
