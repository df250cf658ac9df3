"""The Studio tab: a script with several voices and chapters, rendered line by line into a project kept on
disk, heard while it renders, retaken line by line, and exported as an audiobook with an SRT."""
from __future__ import annotations

import time
from pathlib import Path

import gradio as gr
import numpy as np

from engine.audio.pcm import to_int16
from engine.constants import SAMPLE_RATE
from engine.errors import Cancelled
from engine.checks.policy import CheckMode
from engine.checks.takes import Checks

from ..checks import policy_from
from ..context import AppContext
from ..settings import RANGES
from ..storage import audio_bytes
from ..studio.export import SUFFIXES as EXPORT_SUFFIXES
from ..studio.export import export
from ..studio.importers import SUFFIXES as IMPORT_SUFFIXES
from ..studio.importers import ImportFailed, import_file
from ..studio.parse import parse_script
from ..studio.plan import AUTOMATIC, plan_cues
from ..studio.render import Progress, pending, render_lines
from ..studio.script import ScriptError
from . import studio_parts as parts
from .messages import message_line, reported
from .output import stop_handler
from .player_stream import in_process_stream
from ..waiting import in_line

TABLE_EVERY_S = 1.0  # while rendering, a long script's table is redrawn at most this often


def build_studio_tab(ctx: AppContext, library_version: gr.State) -> gr.Button:
    """Lay out the tab and wire it; returns the Render button (enabled once the model is ready)."""
    with gr.Row(equal_height=False, elem_classes="vd-main"):
        with gr.Column(scale=3, elem_classes="vd-inputs"):
            with gr.Row(equal_height=True):
                # set on page load; any name is taken (the API names a project made since), projects.open checks it
                project = gr.Dropdown([], label="Project", scale=3, allow_custom_value=True, elem_id="studio-project")
                new_name = gr.Textbox(label="New project", placeholder="Name", scale=2, elem_id="studio-new-name")
                create = gr.Button("Create", scale=1, min_width=80, elem_id="studio-create")
            project_message = message_line("studio-project-message")
            with gr.Row(equal_height=True):
                upload = gr.UploadButton("Import .txt .md .srt .epub", file_types=list(IMPORT_SUFFIXES),
                                         type="filepath", elem_id="studio-import")
                narrator = gr.Dropdown(_narrators(ctx), value="", label="Narrator (lines without a name)",
                                       elem_id="studio-narrator")
            script = gr.Textbox(label="Script", lines=12, max_lines=30, placeholder=parts.EXAMPLE,
                                elem_id="studio-script")
            with gr.Accordion("How to write a script", open=False):
                gr.Markdown(parts.HELP)
            message = message_line("studio-problems")  # the script's problems and what the last action did
            table = gr.Dataframe([], headers=parts.COLUMNS, interactive=False, wrap=True, max_height=420,
                                 elem_id="studio-lines", elem_classes="vd-table", column_widths=parts.WIDTHS)
            with gr.Row(equal_height=True):
                render_all = gr.Button("Render all", variant="primary", interactive=False, elem_id="studio-render")
                chapter = gr.Dropdown([], label="Chapter", scale=2, elem_id="studio-chapter")
                render_chapter = gr.Button("Render chapter", elem_id="studio-render-chapter")
                stop = gr.Button("Stop", variant="stop", elem_id="studio-stop")
            steps = gr.Slider(*RANGES["steps"], value=32, step=1, label="Diffusion steps per line (fewer: faster, rougher)",
                              elem_id="studio-steps")
        with gr.Column(scale=2, elem_classes="vd-output"):
            player = in_process_stream(gr.Audio(
                label="Listen as it renders", streaming=True, autoplay=True, interactive=False, type="numpy",
                buttons=[], elem_id="studio-player",
                waveform_options=gr.WaveformOptions(show_recording_waveform=False)), SAMPLE_RATE)
            progress = gr.HTML(parts.progress_html(None), elem_id="studio-progress")
            with gr.Group(visible=False, elem_classes="vd-details") as line_box:
                line_info = gr.Markdown(elem_id="studio-line-info")
                takes = gr.Radio([], label="Takes (the one kept goes into the export)", elem_id="studio-takes")
                take_player = gr.Audio(label="Take", type="numpy", interactive=False, buttons=[],
                                       elem_id="studio-take-player")
                retake = gr.Button("Render a new take (new seed)", elem_id="studio-retake")
                line_message = message_line("studio-line-message")
            gr.Markdown("### Export", elem_classes="vd-step")
            with gr.Row():
                fmt = gr.Radio([s.lstrip(".").upper() for s in EXPORT_SUFFIXES], value="M4B", label="Format",
                               elem_id="studio-format")
                loudness = gr.Number(-18.0, label="Loudness target (LUFS)", minimum=-30, maximum=-10, step=1,
                                     elem_id="studio-loudness")
            per_chapter = gr.Checkbox(label="One file per chapter", elem_id="studio-per-chapter")
            export_button = gr.Button("Export (audio + SRT subtitles)", elem_id="studio-export")
            export_message = message_line("studio-export-message")
            files = gr.File(label="Exported files", file_count="multiple", interactive=False, elem_id="studio-files")

    keys, failed, selected = gr.State([]), gr.State({}), gr.State(None)
    view_outputs = [table, keys, chapter, message]

    def view(slug, text, narrator_name, failed_lines, current=None, chapters=True, note=""):
        """(rows, row keys, chapter choices, message) for the script as it stands: its problems, or `note`."""
        if not slug:
            return [], [], gr.Dropdown(choices=[]), "*Create a project, or import a file to start one.*"
        try:
            script_, cues = _plan(ctx, text, narrator_name)
        except ScriptError as err:
            return [], [], gr.Dropdown(choices=[]), parts.problems_markdown(err)
        project_ = ctx.projects.open(slug)
        choices = parts.chapter_choices(script_)
        chapter_update = gr.Dropdown(choices=choices, value=choices[0][1] if choices else None) if chapters \
            else gr.skip()
        return parts.rows(project_, script_, cues, failed_lines, current), [c.key for c in cues], chapter_update, note

    def open_project(slug, failed_lines):
        if not slug:
            return "", "", *view(None, "", "", failed_lines), ""
        project_ = ctx.projects.open(slug)
        narrator_name = project_.settings.narrator or ""
        return project_.script, narrator_name, *view(slug, project_.script, narrator_name, failed_lines), ""

    def create_project(name):
        project_ = ctx.projects.create(name or "Untitled")
        return gr.Dropdown(choices=ctx.projects.names(), value=project_.slug), "", f"✓ Created '{project_.name}'."

    def import_into_project(path, slug):
        if not Path(path).resolve().is_relative_to(ctx.upload_root.resolve()):
            raise ImportFailed("Only files uploaded in the app are imported.")
        text = import_file(path)
        slug = slug or ctx.projects.create(Path(path).stem).slug
        ctx.projects.open(slug).set_script(text)
        return gr.Dropdown(choices=ctx.projects.names(), value=slug), text, f"✓ Imported {Path(path).name}."

    def save(slug, text, narrator_name, failed_lines):
        if slug:
            project_ = ctx.projects.open(slug)
            project_.set_script(text)
            project_.update_settings(narrator=narrator_name or None)
        return view(slug, text, narrator_name, failed_lines)

    def run(slug, text, narrator_name, failed_lines, steps_, owner, only_chapter=None, key=None):
        """Render the pending lines (of one chapter), or a new take of one line.

        Yields (player, progress, failed lines, *view): each finished line goes to the player at once."""
        try:
            project_, script_, cues = _prepare(ctx, slug, text, narrator_name)
        except ScriptError as err:
            yield gr.skip(), gr.skip(), failed_lines, *[gr.skip()] * 3, parts.problems_markdown(err)
            return
        project_.update_settings(steps=int(steps_))
        if key is not None:
            todo = [c for c in cues if c.key == key]
        else:
            todo = [c for c in pending(project_, cues) if only_chapter is None or c.chapter == int(only_chapter)]
        failed_lines = {k: v for k, v in failed_lines.items() if k not in {c.key for c in todo}}
        if not todo:
            note = "Every line has a take. Select a line in the table to render a new take of it."
            yield gr.skip(), parts.progress_html(None), failed_lines, *view(slug, text, narrator_name, failed_lines,
                                                                             note=note)
            return
        engine = ctx.host.engine
        policy = policy_from(ctx.settings)

        def render(cancel):  # on the GPU worker, which loads the checkers on first use
            checks = Checks(policy, ctx.checks.checker()) if policy.mode != CheckMode.OFF else None
            return render_lines(engine, project_, todo, ctx.library.find_voice, cancel, new_seed=key is not None,
                                checks=checks)

        job = ctx.worker.submit(render, owner=owner)
        counter = Progress.of(todo)
        shown_at, note = 0.0, None
        try:
            for kind, value in job.follow(ctx.worker):
                if kind == "waiting":
                    yield gr.skip(), parts.progress_html(counter, in_line(value)), \
                        failed_lines, *[gr.skip()] * 4
                elif kind == "item":
                    counter.add(value)
                    audio = gr.skip()
                    if value.kind == "done":
                        gap = np.zeros(round(project_.settings.line_gap_s * SAMPLE_RATE), np.float32)
                        # WAV bytes, not an array: Gradio would keep a copy of each line in its cache
                        audio = audio_bytes(to_int16(np.concatenate([value.audio, gap])), SAMPLE_RATE, "WAV")
                    elif value.kind == "failed":
                        failed_lines = {**failed_lines, value.cue.key: value.error}
                    table_update = [gr.skip()] * 4
                    if value.kind == "start" or time.monotonic() - shown_at > TABLE_EVERY_S:
                        shown_at = time.monotonic()
                        current = value.cue.key if value.kind == "start" else None
                        table_update = view(slug, text, narrator_name, failed_lines, current, chapters=False)
                    yield audio, parts.progress_html(counter), failed_lines, *table_update
        except Cancelled:  # Stop: every finished line is kept
            note = "Stopped"
        finally:
            job.cancel.set()  # the page went away or the request ended: free the GPU either way
        failures = f"⚠ {counter.failed} line(s) failed: select one to see why." if counter.failed else ""
        yield gr.skip(), parts.progress_html(counter, note, "stopped" if note else None), failed_lines, \
            *view(slug, text, narrator_name, failed_lines, chapters=False, note=failures)

    def render_pending(slug, text, narrator_name, failed_lines, steps_, request: gr.Request):
        yield from run(slug, text, narrator_name, failed_lines, steps_, request.session_hash)

    def render_one_chapter(slug, text, narrator_name, failed_lines, steps_, only_chapter, request: gr.Request):
        if only_chapter is None:
            raise gr.Error("Pick a chapter first.")
        yield from run(slug, text, narrator_name, failed_lines, steps_, request.session_hash, only_chapter)

    def retake_line(slug, text, narrator_name, failed_lines, steps_, key, request: gr.Request):
        if not key:
            raise gr.Error("Select a line in the table first.")
        yield from run(slug, text, narrator_name, failed_lines, steps_, request.session_hash, key=key)

    def line_details(slug, text, narrator_name, failed_lines, key):
        """(line info, takes, kept take's audio, message) of the selected line."""
        if not (slug and key):
            return gr.skip(), gr.skip(), gr.skip(), ""
        _script, cues = _plan(ctx, text, narrator_name)
        cue = next((c for c in cues if c.key == key), None)
        if cue is None:
            return "", gr.Radio(choices=[]), None, "That line is no longer in the script."
        return *parts.take_details(ctx.projects.open(slug), cue, failed_lines), ""

    def select(slug, text, narrator_name, failed_lines, row_keys, evt: gr.SelectData):
        key = row_keys[evt.index[0]]
        return key, gr.Group(visible=True), *line_details(slug, text, narrator_name, failed_lines, key)

    def choose(slug, key, take_id, text, narrator_name, failed_lines):
        project_ = ctx.projects.open(slug)
        project_.choose(key, take_id)
        take = next(t for t in project_.takes(key) if t.id == take_id)
        return (SAMPLE_RATE, to_int16(project_.audio(take))), *view(slug, text, narrator_name, failed_lines)

    def export_files(slug, text, narrator_name, fmt_name, split, lufs):
        project_, script_, cues = _prepare(ctx, slug, text, narrator_name)
        project_.update_settings(loudness_lufs=float(lufs))
        folder = ctx.dirs.exports / "studio" / project_.slug
        folder.mkdir(parents=True, exist_ok=True)
        written = export(project_, script_, cues, folder / f"{project_.slug}.{fmt_name.lower()}",
                         per_chapter=bool(split))
        files_ = [str(p) for path in written for p in (path, path.with_suffix(".srt"))]
        return files_, f"✓ Exported {len(written)} file(s) at {float(lufs):g} LUFS, with subtitles."

    def refresh(slug):
        """On page load and when the voices change: the project list and the narrators."""
        names = ctx.projects.names()
        slug = slug if slug in {s for _, s in names} else (names[0][1] if names else None)
        return gr.Dropdown(choices=names, value=slug), gr.Dropdown(choices=_narrators(ctx))

    script_inputs = [project, script, narrator, failed]
    render_inputs = [*script_inputs, steps]
    render_outputs = [player, progress, failed, *view_outputs]
    details = [line_info, takes, take_player, line_message]
    wire = {"api_visibility": "private", "show_progress": "hidden"}
    render = {"show_progress": "hidden", "concurrency_limit": 8, "concurrency_id": "generate"}
    open_outputs = [script, narrator, *view_outputs, project_message]
    project.change(reported(open_project, open_outputs), [project, failed], open_outputs, **wire)
    create_outputs = [project, new_name, project_message]
    create.click(reported(create_project, create_outputs), new_name, create_outputs, api_name="studio_create",
                 show_progress="hidden")
    import_outputs = [project, script, project_message]
    upload.upload(reported(import_into_project, import_outputs), [upload, project], import_outputs, **wire) \
        .then(reported(save, view_outputs), script_inputs, view_outputs, **wire)
    script.blur(reported(save, view_outputs), script_inputs, view_outputs, **wire)
    narrator.input(reported(save, view_outputs), script_inputs, view_outputs, **wire)
    render_all.click(reported(render_pending, render_outputs), render_inputs, render_outputs,
                     api_name="studio_render", **render)
    render_chapter.click(reported(render_one_chapter, render_outputs), [*render_inputs, chapter], render_outputs,
                         api_name="studio_render_chapter", **render)
    stop.click(stop_handler(ctx), None, progress, api_name="studio_stop")
    select_outputs = [selected, line_box, *details]
    table.select(reported(select, select_outputs), [*script_inputs, keys], select_outputs, **wire)
    choose_outputs = [take_player, *view_outputs]
    takes.input(reported(choose, choose_outputs), [project, selected, takes, script, narrator, failed],
                choose_outputs, **wire)
    retake.click(reported(retake_line, render_outputs), [*render_inputs, selected], render_outputs,
                 api_name="studio_retake", **render) \
        .then(reported(line_details, details), [*script_inputs, selected], details, **wire)
    export_outputs = [files, export_message]
    export_button.click(reported(export_files, export_outputs), [project, script, narrator, fmt, per_chapter,
                                                                 loudness], export_outputs,
                        api_name="studio_export", show_progress="hidden")
    library_version.change(refresh, project, [project, narrator], api_visibility="private")
    return render_all


def _narrators(ctx: AppContext) -> list[tuple[str, str]]:
    return [(AUTOMATIC.capitalize(), "")] + [(e.name, e.name) for e in ctx.library.entries()]


def _plan(ctx: AppContext, text: str, narrator_name: str | None):
    script_ = parse_script(text or "")
    return script_, plan_cues(script_, narrator_name or None, [e.name for e in ctx.library.entries()])


def _prepare(ctx: AppContext, slug: str | None, text: str, narrator_name: str | None):
    """The project with this script saved (takes of lines no longer in it removed), the script and its lines."""
    if not slug:
        raise gr.Error("Create a project or import a file first.")
    project = ctx.projects.open(slug)
    script_, cues = _plan(ctx, text, narrator_name)
    project.update_settings(narrator=narrator_name or None)
    project.set_script(text, keep={c.key for c in cues})
    return project, script_, cues
