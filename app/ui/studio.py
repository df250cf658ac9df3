"""The Studio tab's layout and wiring: a script with several voices and chapters, rendered line by line into a
project kept on disk, heard while it renders, retaken line by line, and exported as an audiobook with an SRT.
What each event does is in app/ui/studio_handlers.py; what it shows, as plain values, in app/ui/studio_parts.py."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..context import AppContext
from ..settings import RANGES
from ..studio.export import SUFFIXES as EXPORT_SUFFIXES
from ..studio.importers import SUFFIXES as IMPORT_SUFFIXES
from . import studio_parts as parts
from .messages import message_line, reported
from .output import live_start, stop_handler, stop_js
from .studio_handlers import StudioHandlers, narrators


@dataclass
class StudioView:
    """The tab's components, and the per-page state: the table's row keys, failed lines, the selected line."""
    project: gr.Dropdown
    new_name: gr.Textbox
    create: gr.Button
    project_message: gr.Markdown
    upload: gr.UploadButton
    narrator: gr.Dropdown
    script: gr.Textbox
    message: gr.Markdown
    table: gr.Dataframe
    render_all: gr.Button
    chapter: gr.Dropdown
    render_chapter: gr.Button
    stop: gr.Button
    steps: gr.Slider
    live_id: gr.Textbox  # the render buttons' last input: the id the page listens under
    progress: gr.HTML
    line_box: gr.Group
    line_info: gr.Markdown
    takes: gr.Radio
    take_player: gr.Audio
    retake: gr.Button
    line_message: gr.Markdown
    fmt: gr.Radio
    loudness: gr.Number
    per_chapter: gr.Checkbox
    export_button: gr.Button
    export_message: gr.Markdown
    files: gr.File
    keys: gr.State
    failed: gr.State
    selected: gr.State

    @property
    def view_outputs(self) -> list:
        """What StudioHandlers.view fills."""
        return [self.table, self.keys, self.chapter, self.message]


def build_studio_tab(ctx: AppContext, library_version: gr.State) -> gr.Button:
    """Lay out the tab and wire it; returns the Render button (enabled once the model is ready)."""
    view = _lay_out(ctx)
    _wire(view, StudioHandlers(ctx), library_version)
    return view.render_all


def _lay_out(ctx: AppContext) -> StudioView:
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
                # a project's narrator may be a voice deleted since: it is shown and sent as it is, and the script's
                # problems say to pick another (as a value outside the choices, Gradio refused every event sending it)
                narrator = gr.Dropdown(narrators(ctx), value="", label="Narrator (lines without a name)",
                                       allow_custom_value=True, elem_id="studio-narrator")
            script = gr.Textbox(label="Script", lines=9, max_lines=30, placeholder=parts.EXAMPLE,
                                elem_id="studio-script")
            with gr.Accordion("How to write a script", open=False):
                gr.Markdown(parts.HELP)
            message = message_line("studio-problems")  # the script's problems and what the last action did
            # Render above the table, on the first screen at 1920x1080 (below a long table it was not)
            with gr.Row(equal_height=True):
                render_all = gr.Button("Render all", variant="primary", interactive=False, elem_id="studio-render")
                chapter = gr.Dropdown([], label="Chapter", scale=2, elem_id="studio-chapter")
                render_chapter = gr.Button("Render chapter", elem_id="studio-render-chapter")
                stop = gr.Button("Stop", variant="stop", elem_id="studio-stop")
            steps = gr.Slider(*RANGES["steps"], value=32, step=1, elem_id="studio-steps",
                              label="Diffusion steps per line (fewer: faster, rougher)")
            table = gr.Dataframe([], headers=parts.COLUMNS, interactive=False, wrap=True, max_height=420,
                                 elem_id="studio-lines", elem_classes="vd-table", column_widths=parts.WIDTHS)
        with gr.Column(scale=2, elem_classes="vd-output"):
            live_id = gr.Textbox("", visible=False)  # each finished line is heard as it renders (live_player.js)
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

    return StudioView(project=project, new_name=new_name, create=create, project_message=project_message,
                      upload=upload, narrator=narrator, script=script, message=message,
                      table=table, render_all=render_all, chapter=chapter,
                      render_chapter=render_chapter, stop=stop, steps=steps, live_id=live_id,
                      progress=progress, line_box=line_box, line_info=line_info, takes=takes,
                      take_player=take_player, retake=retake, line_message=line_message,
                      fmt=fmt, loudness=loudness, per_chapter=per_chapter,
                      export_button=export_button, export_message=export_message, files=files,
                      keys=gr.State([]), failed=gr.State({}), selected=gr.State(None))


def _wire(v: StudioView, h: StudioHandlers, library_version: gr.State) -> None:
    script_inputs = [v.project, v.script, v.narrator, v.failed]
    render_inputs = [*script_inputs, v.steps]
    render_outputs = [v.progress, v.failed, *v.view_outputs]
    details = [v.line_info, v.takes, v.take_player, v.line_message]
    wire = {"api_visibility": "private", "show_progress": "hidden"}
    render = {"show_progress": "hidden", "concurrency_limit": 8, "concurrency_id": "generate",
              "js": live_start("studio")}
    open_outputs = [v.selected, v.line_box, v.script, v.narrator, *v.view_outputs, v.project_message]
    v.project.change(reported(h.open_project, open_outputs), [v.project, v.failed], open_outputs, **wire)
    # a project picked in the list: the message about another one (its import, a name refused) goes
    v.project.input(lambda: "", None, v.project_message, **wire)
    create_outputs = [v.project, v.new_name, v.project_message]
    v.create.click(reported(h.create_project, create_outputs), v.new_name, create_outputs, api_name="studio_create",
                   show_progress="hidden")
    import_outputs = [v.project, v.script, v.project_message]
    v.upload.upload(reported(h.import_into_project, import_outputs), [v.upload, v.project], import_outputs, **wire) \
        .then(reported(h.save, v.view_outputs), script_inputs, v.view_outputs, **wire)
    v.script.blur(reported(h.save, v.view_outputs), script_inputs, v.view_outputs, **wire)
    v.narrator.input(reported(h.save, v.view_outputs), script_inputs, v.view_outputs, **wire)
    v.render_all.click(reported(h.render_pending, render_outputs), [*render_inputs, v.live_id], render_outputs,
                       api_name="studio_render", **render)
    v.render_chapter.click(reported(h.render_one_chapter, render_outputs), [*render_inputs, v.chapter, v.live_id],
                           render_outputs, api_name="studio_render_chapter", **render)
    v.stop.click(stop_handler(h.ctx), v.live_id, v.progress, api_name="studio_stop", js=stop_js("studio"))
    select_outputs = [v.selected, v.line_box, *details]
    v.table.select(reported(h.select, select_outputs), [*script_inputs, v.keys], select_outputs, **wire)
    choose_outputs = [v.take_player, *v.view_outputs]
    v.takes.input(reported(h.choose, choose_outputs),
                  [v.project, v.selected, v.takes, v.script, v.narrator, v.failed], choose_outputs, **wire)
    v.retake.click(reported(h.retake_line, render_outputs), [*render_inputs, v.selected, v.live_id], render_outputs,
                   api_name="studio_retake", **render) \
        .then(reported(h.line_details, details), [*script_inputs, v.selected], details, **wire)
    export_outputs = [v.files, v.export_message]
    export_inputs = [v.project, v.script, v.narrator, v.fmt, v.per_chapter, v.loudness]
    v.export_button.click(reported(h.export_files, export_outputs), export_inputs, export_outputs,
                          api_name="studio_export", show_progress="hidden")
    library_version.change(h.refresh, v.project, [v.project, v.narrator], api_visibility="private")


