"""What the Clone and Voice design tabs share: the Text column (text, its counter, sample texts, language,
Generate and its message, then the Advanced and Checks accordions) and the Listen column (the output panel).

Built inside a tab's main row, after the tab's own first column. Generate sits right under the text, above
the accordions, so text, Generate and the result fit on one 1366x768 screen; the Listen column is sticky
(style.css), so the player and status stay in view while the page scrolls during a generation.
"""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..context import AppContext
from .advanced import AdvancedSettings, build_advanced
from .checks import build_checks
from .common import describe_text, languages, sample_texts
from .messages import message_line
from .output import OutputPanel, build_output_panel
from .state import SettingsView, shown


@dataclass
class RequestForm:
    text: gr.Textbox
    language: gr.Dropdown
    advanced: AdvancedSettings
    generate: gr.Button
    message: gr.Markdown
    panel: OutputPanel


def build_request_form(ctx: AppContext, view: SettingsView, prefix: str) -> RequestForm:
    """The Text and Listen columns of tab `prefix` ("clone", "design"), whose elem_ids start with it."""
    with gr.Column(scale=4, elem_classes="vd-text-column"):
        gr.Markdown("### 2 · Text", elem_classes="vd-step")
        # no max_length: the browser would cut a long paste silently; the counter below says what is over
        text = gr.Textbox(label="Text to speak", lines=5, elem_id=f"{prefix}-text",
                          placeholder="Type or paste what the voice should say.")
        text_info = gr.Markdown(describe_text(""), elem_classes="vd-hint")
        with gr.Row():
            sample = gr.Dropdown(list(sample_texts()), value=None, label="Or pick a sample text", min_width=160)
            language = view.bind("language", gr.Dropdown(languages(), label="Language", filterable=True,
                                                         value=shown(ctx, "language"), min_width=160,
                                                         elem_id=f"{prefix}-language"))
        generate = gr.Button("Generate", variant="primary", interactive=False, elem_id=f"{prefix}-generate",
                             size="lg")
        message = message_line(f"{prefix}-message")
        advanced = build_advanced(ctx, view, message)
        build_checks(ctx, view, prefix)
    with gr.Column(scale=4, elem_classes="vd-output"):
        gr.Markdown("### 3 · Listen", elem_classes="vd-step")
        panel = build_output_panel(ctx, view, prefix)

    for source in (text, advanced.speed):
        source.change(describe_text, [text, advanced.speed], text_info, api_visibility="private", queue=False)
    sample.change(lambda name: sample_texts().get(name, gr.skip()) if name else gr.skip(), sample, text,
                  api_visibility="private")
    return RequestForm(text, language, advanced, generate, message, panel)
