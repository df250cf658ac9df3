"""What the Studio tab does (app/ui/studio.py lays it out and wires these): open, create and import projects,
save the script, render lines (all pending, a chapter, a new take of one), each heard live as it finishes,
show and choose a line's takes, export."""
from __future__ import annotations

import time
from pathlib import Path

import gradio as gr
import numpy as np

from engine.audio.pcm import to_int16
from engine.checks.policy import CheckMode
from engine.checks.takes import Checks
from engine.constants import SAMPLE_RATE
from engine.errors import Cancelled, SettingError

from ..checks import policy_from
from ..context import AppContext
from ..studio.export import export
from ..studio.importers import ImportFailed, import_file
from ..studio.parse import parse_script
from ..studio.plan import AUTOMATIC, plan_cues
from ..studio.project import Project
from ..studio.render import Progress, batch_key, pending, render_lines
from ..studio.script import ScriptError
from ..waiting import in_line
from . import studio_parts as parts
from .common import literal

TABLE_EVERY_S = 1.0  # while rendering, a long script's table is redrawn at most this often


class StudioHandlers:
    """The tab's event handlers. `view` gives (rows, row keys, chapter choices, message); the render handlers
    yield (progress, failed lines, *view)."""

    def __init__(self, ctx: AppContext):
        self.ctx = ctx
        # the project each page (session) shows now: a render goes on when its page opens another project, and its
        # table, row keys and message are then that project's, not the render's (they were overwritten)
        self.shown: dict[str, str] = {}

    def view(self, slug, text, narrator_name, failed_lines, current=None, chapters=True, note=""):
        """(rows, row keys, chapter choices, message) for the script as it stands: its problems, or `note`."""
        if not slug:
            return [], [], gr.Dropdown(choices=[]), "*Create a project, or import a file to start one.*"
        project_ = self.ctx.projects.open(slug)
        try:
            script_, cues = _plan(self.ctx, text, narrator_name, project_)
        except ScriptError as err:
            return [], [], gr.Dropdown(choices=[]), parts.problems_markdown(err)
        choices = parts.chapter_choices(script_)
        chapter_update = gr.Dropdown(choices=choices, value=choices[0][1] if choices else None) if chapters \
            else gr.skip()
        return parts.rows(project_, script_, cues, failed_lines, current), [c.key for c in cues], chapter_update, note

    def open_project(self, slug, failed_lines, request: gr.Request):
        """(selected line, line panel, script, narrator, *view, message): no line selected, its panel hidden (a line
        of the project before is not this one's: Retake would look for it here). The message is left as it is: a
        project opens when it is created or imported too, and their message says what they did (it was cleared)."""
        unselected = (None, gr.Group(visible=False))
        self.shown[request.session_hash] = slug
        if not slug:
            return *unselected, "", "", *self.view(None, "", "", failed_lines), gr.skip()
        project_ = self.ctx.projects.open(slug)
        narrator_name = project_.settings.narrator or ""
        return *unselected, project_.script, narrator_name, \
            *self.view(slug, project_.script, narrator_name, failed_lines), gr.skip()

    def create_project(self, name):
        project_ = self.ctx.projects.create(name or "Untitled")
        projects = gr.Dropdown(choices=self.ctx.projects.names(), value=project_.slug)
        return projects, "", f"✓ Created '{literal(project_.name)}'."

    def import_into_project(self, path, slug):
        if not Path(path).resolve().is_relative_to(self.ctx.upload_root.resolve()):
            raise ImportFailed("Only files uploaded in the app are imported.")
        text = import_file(path)
        slug = slug or self.ctx.projects.create(Path(path).stem).slug
        self.ctx.projects.open(slug).set_script(text)
        return gr.Dropdown(choices=self.ctx.projects.names(), value=slug), text, f"✓ Imported {Path(path).name}."

    def save(self, slug, text, narrator_name, failed_lines):
        if slug:
            project_ = self.ctx.projects.open(slug)
            project_.set_script(text)
            project_.update_settings(narrator=narrator_name or None)
        return self.view(slug, text, narrator_name, failed_lines)

    def run(self, slug, text, narrator_name, failed_lines, steps_, owner, live, only_chapter=None, key=None):
        """Render the pending lines (of one chapter), or a new take of one line.

        Yields (progress, failed lines, *view); each finished line is published to `live` at once."""
        try:
            project_, script_, cues = _prepare(self.ctx, slug, text, narrator_name)
        except ScriptError as err:
            yield gr.skip(), failed_lines, *[gr.skip()] * 3, parts.problems_markdown(err)
            return
        project_.update_settings(steps=int(steps_))
        if key is not None:
            todo = [c for c in cues if c.key == key]
        else:
            todo = [c for c in pending(project_, cues) if only_chapter is None or c.chapter == int(only_chapter)]
        failed_lines = {k: v for k, v in failed_lines.items() if k not in {c.key for c in todo}}
        if not todo:
            note = "Every line has a take. Select a line in the table to render a new take of it."
            yield parts.progress_html(None), failed_lines, \
                *self.view(slug, text, narrator_name, failed_lines, note=note)
            return
        engine = self.ctx.host.engine
        policy = policy_from(self.ctx.settings)

        def render(cancel):  # on the GPU worker, which loads the checkers on first use
            checks = Checks(policy, self.ctx.checks.checker()) if policy.mode != CheckMode.OFF else None
            return render_lines(engine, project_, todo, self.ctx.library.find_voice, cancel, new_seed=key is not None,
                                checks=checks, speak_numbers=self.ctx.settings.speaks_numbers)

        # beside other generations of its settings, checked or not (checks take turns: engine/checks/checker.py)
        job = self.ctx.worker.submit(render, owner=owner, batch=batch_key(engine, project_))
        if live is not None:
            live.attach(stop=job.cancel.set)  # the page stopped listening: the GPU goes to the next job
        counter = Progress.of(todo)
        shown_at, note, warnings = 0.0, None, []
        try:
            for kind, value in job.follow(self.ctx.worker):
                if kind == "waiting":
                    yield parts.progress_html(counter, in_line(value)), failed_lines, *[gr.skip()] * 4
                elif kind == "item":
                    counter.add(value)
                    if value.warning:
                        warnings.append(f"⚠ Line {value.cue.line.number}: {value.warning}")
                    if value.kind == "done" and live is not None:
                        gap = np.zeros(round(project_.settings.line_gap_s * SAMPLE_RATE), np.float32)
                        live.put(to_int16(np.concatenate([value.audio, gap])))
                    elif value.kind == "failed":
                        failed_lines = {**failed_lines, value.cue.key: value.error}
                    elif value.kind == "stopped":  # the disk is full (or read-only): said once, not per line
                        note = value.error
                    table_update = [gr.skip()] * 4
                    due = value.kind == "start" or time.monotonic() - shown_at > TABLE_EVERY_S
                    if due and self._shows(owner, slug):
                        shown_at = time.monotonic()
                        current = value.cue.key if value.kind == "start" else None
                        table_update = self.view(slug, text, narrator_name, failed_lines, current, chapters=False)
                    yield parts.progress_html(counter), failed_lines, *table_update
        except Cancelled:  # Stop: every finished line is kept
            note = "Stopped"
        finally:
            job.cancel.set()  # the page went away or the request ended: free the GPU either way
        failures = [f"⚠ {counter.failed} line(s) failed: select one to see why."] if counter.failed else []
        view = self.view(slug, text, narrator_name, failed_lines, chapters=False, note=" ".join(failures + warnings)) \
            if self._shows(owner, slug) else [gr.skip()] * 4
        yield parts.progress_html(counter, note, "stopped" if note else None), failed_lines, *view

    # Each render handler publishes under the page's `live_id` (live_player.js): the page hears every finished
    # line, or why there is none.
    def render_pending(self, slug, text, narrator_name, failed_lines, steps_, live_id, request: gr.Request):
        with self.ctx.live_audio.publishing(live_id) as live:
            yield from self.run(slug, text, narrator_name, failed_lines, steps_, request.session_hash, live)

    def render_one_chapter(self, slug, text, narrator_name, failed_lines, steps_, only_chapter, live_id,
                           request: gr.Request):
        with self.ctx.live_audio.publishing(live_id) as live:
            if only_chapter is None:
                raise SettingError("Pick a chapter first.")
            yield from self.run(slug, text, narrator_name, failed_lines, steps_, request.session_hash, live,
                                only_chapter)

    def retake_line(self, slug, text, narrator_name, failed_lines, steps_, key, live_id, request: gr.Request):
        with self.ctx.live_audio.publishing(live_id) as live:
            if not key:
                raise SettingError("Select a line in the table first.")
            yield from self.run(slug, text, narrator_name, failed_lines, steps_, request.session_hash, live, key=key)

    def _shows(self, owner: str, slug: str) -> bool:
        """Whether the page `owner` shows the project `slug` (an API client, which opens none, is shown its render)."""
        return self.shown.get(owner, slug) == slug

    def line_details(self, slug, text, narrator_name, failed_lines, key):
        """(line info, takes, kept take's audio, message) of the selected line."""
        if not (slug and key):
            return gr.skip(), gr.skip(), gr.skip(), ""
        project_ = self.ctx.projects.open(slug)
        _script, cues = _plan(self.ctx, text, narrator_name, project_)
        cue = next((c for c in cues if c.key == key), None)
        if cue is None:
            return "", gr.Radio(choices=[]), None, "That line is no longer in the script."
        return *parts.take_details(project_, cue, failed_lines), ""

    def select(self, slug, text, narrator_name, failed_lines, row_keys, evt: gr.SelectData):
        key = row_keys[evt.index[0]]
        return key, gr.Group(visible=True), *self.line_details(slug, text, narrator_name, failed_lines, key)

    def choose(self, slug, key, take_id, text, narrator_name, failed_lines):
        project_ = self.ctx.projects.open(slug)
        project_.choose(key, take_id)
        take = next(t for t in project_.takes(key) if t.id == take_id)
        return (SAMPLE_RATE, to_int16(project_.audio(take))), *self.view(slug, text, narrator_name, failed_lines)

    def export_files(self, slug, text, narrator_name, fmt_name, split, lufs):
        project_, script_, cues = _prepare(self.ctx, slug, text, narrator_name)
        project_.update_settings(loudness_lufs=float(lufs))
        folder = self.ctx.dirs.exports / "studio" / project_.slug
        folder.mkdir(parents=True, exist_ok=True)
        written = export(project_, script_, cues, folder / f"{project_.slug}.{fmt_name.lower()}",
                         per_chapter=bool(split))
        files_ = [str(p) for path in written for p in (path, path.with_suffix(".srt"))]
        return files_, f"✓ Exported {len(written)} file(s) at {float(lufs):g} LUFS, with subtitles."

    def refresh(self, slug):
        """On page load and when the voices change: the project list and the narrators."""
        names = self.ctx.projects.names()
        slug = slug if slug in {s for _, s in names} else (names[0][1] if names else None)
        return gr.Dropdown(choices=names, value=slug), gr.Dropdown(choices=narrators(self.ctx))


def narrators(ctx: AppContext) -> list[tuple[str, str]]:
    return [(AUTOMATIC.capitalize(), "")] + [(e.name, e.name) for e in ctx.library.entries()]


def _plan(ctx: AppContext, text: str, narrator_name: str | None, project: Project):
    """The script and its lines; a line of a voice deleted since is planned when `project` has a take of it."""
    script_ = parse_script(text or "")
    return script_, plan_cues(script_, narrator_name or None, [e.name for e in ctx.library.entries()],
                              project.rendered())


def _prepare(ctx: AppContext, slug: str | None, text: str, narrator_name: str | None):
    """The project with this script saved (takes of lines no longer in it removed), the script and its lines."""
    if not slug:
        raise SettingError("Create a project or import a file first.")
    project = ctx.projects.open(slug)
    script_, cues = _plan(ctx, text, narrator_name, project)
    project.update_settings(narrator=narrator_name or None)
    project.set_script(text, keep={c.key for c in cues})
    return project, script_, cues
