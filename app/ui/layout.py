"""The whole page: header + Clone / Voice design / Studio / Voices / History tabs, wired to one AppContext."""
from __future__ import annotations

import gradio as gr

from ..context import AppContext
from .api import build_api_tab
from .checks import register_checks_api
from .clone import build_clone_tab, saved_voice, voice_choices
from .design import build_design_tab
from .history import build_history_tab
from .state import SettingsView
from .status import build_header, wire_header
from .studio import build_studio_tab
from .voices import build_voices_tab


def build_app(ctx: AppContext) -> gr.Blocks:
    with gr.Blocks(title="VoiceDesk", analytics_enabled=False, delete_cache=(3600, 86400)) as blocks:
        # Bumped by whatever changes the library or the history; the tabs that show them refresh on change.
        library_version, history_version = gr.State(0), gr.State(0)
        view = SettingsView(ctx)
        header = build_header(ctx, view)
        with gr.Tabs(elem_id="vd-tabs") as tabs:
            with gr.Tab("Clone", id="clone", elem_id="tab-clone"):
                clone = build_clone_tab(ctx, view, library_version, history_version)
            with gr.Tab("Voice design", id="design", elem_id="tab-design"):
                design = build_design_tab(ctx, view, history_version, library_version)
            with gr.Tab("Studio", id="studio", elem_id="tab-studio"):
                studio_render = build_studio_tab(ctx, library_version)
            with gr.Tab("Voices", id="voices", elem_id="tab-voices"):
                build_voices_tab(ctx, library_version, clone.voice)
            with gr.Tab("History", id="history", elem_id="tab-history"):
                build_history_tab(ctx, history_version, tabs, clone.form.text, design.text)
            with gr.Tab("API", id="api", elem_id="tab-api"):
                show_api, api_outputs = build_api_tab(ctx)
        wire_header(ctx, header, [(clone.form.generate, clone.form.text), (design.generate, design.text),
                              (studio_render, None)])
        register_checks_api(ctx)
        # A page shows what is saved now, not what was saved when the app started.
        view.wire(blocks)
        blocks.load(lambda: (gr.Dropdown(voice_choices(ctx), value=saved_voice(ctx)), 1, 1), None,
                    [clone.voice, library_version, history_version], api_visibility="private")
        blocks.load(_show_notices(ctx), None, None, api_visibility="private")
        blocks.load(show_api, None, api_outputs, api_visibility="private")  # the address this page was opened at
    return blocks


def _show_notices(ctx: AppContext):
    def show() -> None:
        for notice in ctx.take_notices():
            gr.Warning(notice, duration=None)  # stays until closed: it is said only once

    return show
