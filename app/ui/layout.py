"""The whole page: header + Clone / Voice design / Voices / History tabs, wired to one AppContext."""
from __future__ import annotations

import gradio as gr

from ..context import AppContext
from .clone import build_clone_tab
from .design import build_design_tab
from .history import build_history_tab
from .status import build_header, wire_header
from .voices import build_voices_tab


def build_app(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="VoiceDesk", analytics_enabled=False, delete_cache=(3600, 86400)) as blocks:
        # Bumped by whatever changes the library or the history; the tabs that show them refresh on change.
        library_version, history_version = gr.State(0), gr.State(0)
        header = build_header(ctx)
        with gr.Tabs(elem_id="vd-tabs"):
            with gr.Tab("Clone", id="clone", elem_id="tab-clone"):
                clone = build_clone_tab(ctx, library_version, history_version)
            with gr.Tab("Voice design", id="design", elem_id="tab-design"):
                design = build_design_tab(ctx, history_version)
            with gr.Tab("Voices", id="voices", elem_id="tab-voices"):
                build_voices_tab(ctx, library_version, clone.voice)
            with gr.Tab("History", id="history", elem_id="tab-history"):
                build_history_tab(ctx, history_version)
        wire_header(ctx, header, [clone.generate, design.generate])
        # A page opened later must show what was saved since the app started.
        blocks.load(lambda: (1, 1), None, [library_version, history_version], api_visibility="private")
        blocks.load(_show_notices(ctx), None, None, api_visibility="private")
    return blocks


def _show_notices(ctx: AppContext):
    def show() -> None:
        for notice in ctx.take_notices():
            gr.Warning(notice, duration=None)  # stays until closed: it is said only once

    return show
