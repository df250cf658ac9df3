"""The Voices tab: the saved-voice library (listen, rename, delete, export, import)."""
from __future__ import annotations

import gradio as gr

from ..context import AppContext
from ..library import DamagedVoice
from .clone import NEW_CLIP, voice_choices
from .common import describe_entry, export_link, literal, reference_player, shortened
from .confirm_delete import delete_confirm, hidden
from .messages import message_line, reported

COLUMNS = ["Name", "Length", "Saved", "Transcript"]


def voice_rows(ctx: AppContext) -> tuple[list[list], list[str]]:
    """The table's rows and their slugs: the usable voices, then the damaged ones (so they can be deleted)."""
    entries, damaged = ctx.library.scan()
    rows = [[e.name, f"{e.seconds:.1f} s", e.created[:10], shortened(e.transcript, 80)] for e in entries]
    rows += [[f"⚠ {d.name}", "damaged", "", d.problem] for d in damaged]
    return rows, [e.slug for e in entries] + [d.slug for d in damaged]


def _describe_damaged(voice: DamagedVoice) -> str:
    return (f"**⚠ {literal(voice.name)} is damaged**: {voice.problem}, so it cannot be used. Delete it, or repair its "
            f"folder by hand: `{voice.folder}`")


def build_voices_tab(ctx: AppContext, library_version: gr.State, clone_voice: gr.Dropdown) -> None:
    rows, slugs = voice_rows(ctx)
    gr.Markdown("Voices you saved from the Clone tab. Select one to listen to it, rename, export or delete it. "
                "A voice exported here can be imported on another computer.", elem_classes="vd-hint")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            table = gr.Dataframe(rows, headers=COLUMNS, interactive=False, elem_id="voices-table", wrap=True,
                                 elem_classes="vd-table", column_widths=["25%", "10%", "15%", "50%"], max_height=420)
            empty_note = gr.Markdown("*No saved voices yet: make one in the Clone tab.*", visible=not rows)
            import_button = gr.UploadButton("Import a voice (.zip)", file_types=[".zip"], size="sm")
            import_message = message_line("voices-import-message")
        with gr.Column(scale=2):
            with gr.Group(visible=False, elem_classes="vd-details") as details:
                info = gr.Markdown()
                preview = gr.HTML(elem_id="voices-reference")
                new_name = gr.Textbox(label="Name", max_length=60)
                with gr.Row():
                    rename = gr.Button("Rename", size="sm", min_width=90)
                    export = gr.HTML(elem_id="voices-export")
                    delete = gr.Button("Delete", variant="stop", size="sm", min_width=90, elem_id="voices-delete")
                confirm = delete_confirm("voices")
            message = message_line("voices-message")  # outside the details: "Deleted" stays in view
    slugs_state = gr.State(slugs)
    selected = gr.State(None)

    def refresh(current):
        rows, slugs = voice_rows(ctx)
        keep = current if current in slugs else NEW_CLIP
        return rows, slugs, gr.Markdown(visible=not rows), gr.Dropdown(choices=voice_choices(ctx), value=keep)

    def list_voices() -> list[dict]:
        entries, damaged = ctx.library.scan()
        return ([{"slug": e.slug, "name": e.name, "seconds": e.seconds, "transcript": e.transcript, "damaged": None}
                 for e in entries] + [{"slug": d.slug, "name": d.name, "damaged": d.problem} for d in damaged])

    def select(slugs, evt: gr.SelectData):
        slug = slugs[evt.index[0]]
        entry = ctx.library.read(slug)
        if isinstance(entry, DamagedVoice):
            return slug, gr.Group(visible=True), _describe_damaged(entry), "", entry.name, "", ""
        return (entry.slug, gr.Group(visible=True), describe_entry(entry), reference_player(entry), entry.name,
                export_link(entry), "")

    def do_rename(slug, name, version):
        entry = ctx.library.rename(slug, name)  # the folder (and so the links) may follow the new name
        return (entry.slug, describe_entry(entry), reference_player(entry), export_link(entry), version + 1,
                f"✓ Renamed to '{literal(entry.name)}'.")

    def describe(slug):
        return f"'{literal(ctx.library.read(slug).name)}'"

    def remove(slug):
        name = ctx.library.delete(slug)
        if ctx.settings.last_voice == slug:
            ctx.save_settings(last_voice=None)
        return f"✓ Deleted '{literal(name)}'."

    def do_import(file, version):
        entry = ctx.library.import_archive(file)
        return version + 1, f"✓ Imported '{literal(entry.name)}'."

    library_version.change(refresh, clone_voice, [table, slugs_state, empty_note, clone_voice],
                           api_visibility="private")
    select_outputs = [selected, details, info, preview, new_name, export, message]
    table.select(reported(select, select_outputs), slugs_state, select_outputs, api_visibility="private",
                 show_progress="hidden").then(hidden, None, confirm.box, api_visibility="private")
    rename_outputs = [selected, info, preview, export, library_version, message]
    rename.click(reported(do_rename, rename_outputs), [selected, new_name, library_version], rename_outputs,
                 api_name="rename_voice", show_progress="hidden")
    confirm.wire(delete=delete, selected=selected, details=details, version=library_version, message=message,
                 describe=describe, remove=remove, api_name="delete_voice")
    import_outputs = [library_version, import_message]
    import_button.upload(reported(do_import, import_outputs), [import_button, library_version], import_outputs,
                         api_name="import_voice", show_progress="hidden")
    gr.api(list_voices, api_name="list_voices")
