"""What the Studio tab shows, as plain values: its help, the rows of the lines table, a line's takes and the
progress bar (app/ui/studio.py lays the tab out, app/ui/studio_handlers.py fills it)."""
from __future__ import annotations

import html

import gradio as gr

from engine.audio.pcm import to_int16
from engine.constants import SAMPLE_RATE

from ..checks import summary
from ..studio.plan import Cue
from ..studio.project import Project
from ..studio.render import Progress
from ..studio.script import Script, ScriptError
from .common import literal

COLUMNS = ["#", "Chapter", "Voice", "Line", "State", "Length", "Takes", "Checks"]
WIDTHS = ["4%", "12%", "11%", "31%", "9%", "10%", "9%", "14%"]
EXAMPLE = """# Chapter one
It was late when the phone rang.
Anna: Hello? Who is this?
[pause 1s]
[voice Caller = male, low pitch]
Caller: You know who this is. {speed 0.9}
"""
HELP = """\
**One line, one voice.** A line without a name is read by the narrator (pick it above).
`Anna: Hello.` or `[Anna] Hello.` is spoken by your saved voice *Anna*.
`[voice Bob = male, elderly, low pitch]` designs a voice called *Bob* (gender, age, pitch, whisper, accent);
one short line of his (a few seconds, said without options) is rendered first and becomes his voice, so he
sounds the same on every line; the automatic narrator is made the same way.

**Chapters.** A line starting with `#` or `##` starts a chapter: the export puts a chapter mark there.

**Pauses.** `[pause 500ms]` or `[pause 2s]`, on a line of their own or inside a line.
A blank line between lines is a longer pause (a new paragraph).

**Per-line options**, in braces at the end of a line: `{speed 0.9}`, `{instruct "whisper"}`,
`{language English}`, `{seed 7}`, `{duration 3.5}` (seconds).

**Sounds and pronunciation** go to the model as they are: `[laughter]`, `[sigh]`, English phones
`[B EY1 S]`, pinyin with tones `ZHE2`. `<!-- notes -->` are not read. Start a line with `\\` to read
it as it is (`\\Note: ...` is not a voice called Note).

**Import** a .md script, or prose: .txt (each paragraph a line; "Chapter 1" lines start chapters),
.srt (each subtitle a line, timed to its cue) or .epub (chapters from the book's contents).

**Render** all lines or one chapter: each line plays as soon as it is done. Select a line in the table
to hear its takes, keep another one, or render a new take. **Export** the book as M4B (with chapter
marks), MP3, FLAC or WAV at a loudness target, with an SRT of where each line is.
"""


def line_state(project: Project, cue: Cue, failed: dict, current: str | None) -> str:
    if cue.key == current:
        return "rendering"
    if project.kept(cue.key) is not None:
        return "done"
    return "failed" if cue.key in failed else "queued"


def rows(project: Project, script: Script, cues: list[Cue], failed: dict, current: str | None = None) -> list[list]:
    out = []
    for cue in cues:
        kept = project.kept(cue.key)
        text = cue.line.text if len(cue.line.text) <= 90 else cue.line.text[:89] + "…"
        out.append([cue.line.number, script.chapters[cue.chapter].title or "(opening)", cue.speaker.label, text,
                    line_state(project, cue, failed, current), "" if kept is None else f"{kept.seconds:.1f} s",
                    len(project.takes(cue.key)), summary({"parts": [kept.checks]} if kept and kept.checks else None)])
    return out


def chapter_choices(script: Script) -> list[tuple[str, str]]:
    return [(c.title or "(opening)", str(i)) for i, c in enumerate(script.chapters) if c.lines]


def take_details(project: Project, cue: Cue, failed: dict) -> tuple:
    """(line info, takes radio, kept take's audio) for the selected line."""
    takes = project.takes(cue.key)
    kept = project.kept(cue.key)
    choices = [(f"Take {i + 1} · {t.seconds:.1f} s · seed {t.seed}" + (f" · {t.checks['badge']}" if t.checks else ""),
                t.id) for i, t in enumerate(takes)]
    info = f"**Line {cue.line.number}** · {literal(cue.speaker.label)}\n\n> {literal(cue.line.text)}"
    if cue.key in failed:
        info += f"\n\nⓘ The last render failed: {html.escape(failed[cue.key])}"
    audio = None if kept is None else (SAMPLE_RATE, to_int16(project.audio(kept)))
    return info, gr.Radio(choices=choices, value=None if kept is None else kept.id), audio


def problems_markdown(err: ScriptError) -> str:
    shown = "\n".join(f"- {html.escape(str(p))}" for p in err.problems[:20])
    more = f"\n- … and {len(err.problems) - 20} more" if len(err.problems) > 20 else ""
    return f"**Fix the script first ({len(err.problems)} problem(s)):**\n{shown}{more}"


def progress_html(counter: Progress | None, note: str | None = None, state: str | None = None) -> str:
    """The progress bar; `state` (rendering, done, stopped) is in data-state for scripts and tests."""
    if counter is None:
        return '<div class="vd-studio-progress" data-state="idle">Nothing is rendering.</div>'
    finished = counter.done + counter.failed >= counter.total
    parts = [f"{counter.done} of {counter.total} lines rendered"]
    if counter.failed:
        parts.append(f"{counter.failed} failed")
    if counter.rtf is not None:
        parts.append(f"RTF {counter.rtf:.3f}")
    if counter.seconds_left is not None and not finished:
        left = counter.seconds_left
        parts.append(f"about {left:.0f} s left" if left < 90 else f"about {left / 60:.0f} min left")
    if note:
        parts.append(note)
    state = state or ("done" if finished else "rendering")
    return (f'<div class="vd-studio-progress" data-state="{state}" data-done="{counter.done}" '
            f'data-total="{counter.total}">{html.escape(" · ".join(parts))}'
            f'<div class="vd-progress"><div style="width:{100 * counter.fraction:.0f}%"></div></div></div>')
