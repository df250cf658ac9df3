"""The History tab: every finished generation (text, voice, mode, RTF, checks, date) to replay, download or
delete."""
from __future__ import annotations

import datetime as dt

import gradio as gr

from ..checks import badge_html, summary
from ..context import AppContext
from ..history import HistoryEntry
from ..metrics import milliseconds
from .common import literal, shortened
from .confirm_delete import delete_confirm, hidden
from .design import DESIGNED
from .messages import message_line, reported
from .output import download_links

COLUMNS = ["When", "Text", "Voice", "Mode", "RTF", "Length", "Checks"]


def history_rows(ctx: AppContext) -> tuple[list[list], list[str]]:
    entries = list(reversed(ctx.history.entries()))  # newest first
    return [_row(e) for e in entries], [e.id for e in entries]


def local_time(created: str) -> str:
    """A stored time (ISO 8601, UTC) as this computer's local time, to the minute."""
    return dt.datetime.fromisoformat(created).astimezone().strftime("%Y-%m-%d %H:%M")


def _mode(meta: dict) -> str:
    """The mode, marked when the demo model made the result (noise, not a voice)."""
    return meta.get("mode", "") + (" · demo model" if meta.get("demo") else "")


def _row(e: HistoryEntry) -> list:
    rtf = e.meta.get("rtf")
    text = shortened(e.text, 70)
    return [local_time(e.created), text, _voice(e.meta), _mode(e.meta),
            "—" if rtf is None else f"{rtf:.3f}",
            f"{e.meta.get('audio_s', 0):.1f} s" + (" (stopped)" if e.meta.get("stopped") else ""),
            summary(e.meta.get("checks"))]


VIA = {"api": " · via API", "wyoming": " · via Wyoming"}  # where a request came from, when not this page


def _voice(meta: dict) -> str:
    """The voice, and where the request came from when it was not this page (the API, a Wyoming assistant)."""
    return meta.get("voice", "") + VIA.get(meta.get("source"), "")


def build_history_tab(ctx: AppContext, history_version: gr.State, tabs: gr.Tabs, clone_text: gr.Textbox,
                      design_text: gr.Textbox) -> None:
    """`tabs` and the two text boxes: where "Use this text" puts a result's text."""
    rows, ids = history_rows(ctx)
    gr.Markdown(f"The last {ctx.history.max_entries} results are kept (oldest removed first). Times are this "
                "computer's local time.", elem_classes="vd-hint")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            table = gr.Dataframe(rows, headers=COLUMNS, interactive=False, elem_id="history-table", wrap=True,
                                 elem_classes="vd-table", max_height=480,
                                 column_widths=["13%", "28%", "14%", "11%", "8%", "10%", "16%"])
            empty_note = gr.Markdown("*Nothing yet: results appear here when they finish.*", visible=not rows)
        with gr.Column(scale=2):
            with gr.Group(visible=False, elem_classes="vd-details") as details:
                info = gr.Markdown()
                checks = gr.HTML(elem_id="history-checks")
                player = gr.Audio(label="Replay", interactive=False, type="filepath", buttons=[],
                                  elem_id="history-player")
                with gr.Row():
                    downloads = gr.HTML(download_links(None), elem_id="history-downloads")
                    reuse = gr.Button("Use this text", size="sm", min_width=110, elem_id="history-reuse")
                    delete = gr.Button("Delete", variant="stop", size="sm", min_width=90, elem_id="history-delete")
                confirm = delete_confirm("history")
            message = message_line("history-message")
    ids_state = gr.State(ids)
    selected = gr.State(None)

    def refresh():
        rows, ids = history_rows(ctx)
        return rows, ids, gr.Markdown(visible=not rows)

    def select(ids, evt: gr.SelectData):
        entry = ctx.history.get(ids[evt.index[0]])
        meta = entry.meta
        rtf = "—" if meta.get("rtf") is None else f"{meta['rtf']:.3f}"
        ttfa = (f"first sound heard after {milliseconds(meta.get('heard_first_audio_s'))}, "
                f"engine first audio {milliseconds(meta.get('first_audio_s'))}")
        details = [local_time(entry.created), _voice(meta), _mode(meta), f"RTF {rtf}", ttfa,
                   f"seed {meta.get('seed', '—')}", meta.get("backend", "")]
        text = f"{literal(entry.text)}\n\n*{literal(' · '.join(details))}*"
        verdicts = meta.get("checks") or {}
        # the stored file itself is played (a static path: Gradio serves it in place, no cached copy)
        return (entry.id, gr.Group(visible=True), text, badge_html(verdicts.get("parts", []), verdicts.get("skipped")),
                str(entry.audio), download_links(entry.id), "")

    def describe(entry_id):
        text = ctx.history.get(entry_id).text
        return f"the result “{literal(shortened(text, 40))}”"

    def remove(entry_id):
        ctx.history.delete(entry_id)
        return "✓ Deleted."

    def use_text(entry_id):
        """The entry's text in the tab that made it (Voice design for a designed voice, else Clone)."""
        if not entry_id:
            return gr.skip(), gr.skip(), gr.skip()
        entry = ctx.history.get(entry_id)
        if entry.meta.get("voice", "").startswith(DESIGNED):
            return gr.Tabs(selected="design"), gr.skip(), entry.text
        return gr.Tabs(selected="clone"), entry.text, gr.skip()

    def list_history() -> list[dict]:
        """Every stored result, newest first, with its metadata."""
        return [{**e.to_json(), "file": e.audio.name} for e in reversed(ctx.history.entries())]

    history_version.change(refresh, None, [table, ids_state, empty_note], api_visibility="private")
    select_outputs = [selected, details, info, checks, player, downloads, message]
    table.select(reported(select, select_outputs), ids_state, select_outputs, api_visibility="private",
                 show_progress="hidden").then(hidden, None, confirm.box, api_visibility="private")
    confirm.wire(delete=delete, selected=selected, details=details, version=history_version, message=message,
                 describe=describe, remove=remove, api_name="delete_history")
    reuse.click(use_text, selected, [tabs, clone_text, design_text], api_visibility="private")
    gr.api(list_history, api_name="list_history")
