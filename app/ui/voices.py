"""The Voices tab: the saved-voice library (listen, rename, delete, export, import)."""
from __future__ import annotations

import gradio as gr

from ..context import AppContext
from .clone import NEW_CLIP, voice_choices
from .common import describe_entry, friendly_errors, reference_audio

COLUMNS = ["Name", "Length", "Saved", "Transcript"]


def voice_rows(ctx: AppContext) -> tuple[list[list], list[str]]:
    entries = ctx.library.entries()
    rows = [[e.name, f"{e.seconds:.1f} s", e.created[:10], e.transcript[:80]] for e in entries]
    return rows, [e.slug for e in entries]


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
        with gr.Column(scale=2):
            with gr.Group(visible=False, elem_classes="vd-details") as details:
                info = gr.Markdown()
                preview = gr.Audio(label="Reference clip", interactive=False, type="numpy", buttons=[])
                new_name = gr.Textbox(label="Name", max_length=60)
                with gr.Row():
                    rename = gr.Button("Rename", size="sm", min_width=90)
                    export = gr.DownloadButton("Export (.zip)", size="sm", min_width=90)
                    delete = gr.Button("Delete", variant="stop", size="sm", min_width=90)
    slugs_state = gr.State(slugs)
    selected = gr.State(None)

    def refresh(current):
        rows, slugs = voice_rows(ctx)
        keep = current if current in slugs else NEW_CLIP
        return rows, slugs, gr.Markdown(visible=not rows), gr.Dropdown(choices=voice_choices(ctx), value=keep)

    def list_voices() -> list[dict]:
        return [{"slug": e.slug, "name": e.name, "seconds": e.seconds, "transcript": e.transcript}
                for e in ctx.library.entries()]

    def select(slugs, evt: gr.SelectData):
        entry = ctx.library.get(slugs[evt.index[0]])
        archive = ctx.library.export(entry.slug, ctx.dirs.exports)
        return (entry.slug, gr.Group(visible=True), describe_entry(entry), reference_audio(entry), entry.name,
                gr.DownloadButton(value=str(archive)))

    def do_rename(slug, name, version):
        entry = ctx.library.rename(slug, name)
        gr.Info(f"Renamed to '{entry.name}'.", duration=4)
        return entry.slug, describe_entry(entry), version + 1

    def do_delete(slug, version):
        if not slug:
            return gr.skip(), gr.skip(), gr.skip()
        name = ctx.library.get(slug).name
        ctx.library.delete(slug)
        if ctx.settings.last_voice == slug:
            ctx.save_settings(last_voice=None)
        gr.Info(f"Deleted '{name}'.", duration=4)
        return None, gr.Group(visible=False), version + 1

    def do_import(file, version):
        entry = ctx.library.import_archive(file)
        gr.Info(f"Imported '{entry.name}'.", duration=4)
        return version + 1

    library_version.change(refresh, clone_voice, [table, slugs_state, empty_note, clone_voice],
                           api_visibility="private")
    table.select(friendly_errors(select), slugs_state, [selected, details, info, preview, new_name, export],
                 api_visibility="private")
    rename.click(friendly_errors(do_rename), [selected, new_name, library_version], [selected, info, library_version],
                 api_name="rename_voice")
    delete.click(friendly_errors(do_delete), [selected, library_version], [selected, details, library_version],
                 api_name="delete_voice", js="(slug, v) => confirm('Delete this voice?') ? [slug, v] : [null, v]")
    import_button.upload(friendly_errors(do_import), [import_button, library_version], library_version,
                         api_name="import_voice")
    gr.api(list_voices, api_name="list_voices")
