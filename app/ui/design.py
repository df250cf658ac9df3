"""The Voice design tab: describe a voice (gender, age, pitch, style, accent or dialect) instead of
cloning one."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from engine.errors import TextInputError
from engine.text.instruct import CATEGORIES, choices, compose_instruct
from engine.text.limits import MAX_TEXT_CHARS

from .. import generation
from ..context import AppContext
from .advanced import build_advanced, make_config
from .checks import build_checks
from .common import describe_text, languages, sample_texts
from .messages import message_line, reported
from .output import OutputPanel, build_output_panel
from .state import SettingsView, output_device, shown

ANY = ""  # a category left to the model
_TITLES = {"gender": "Gender", "age": "Age", "pitch": "Pitch", "style": "Style", "accent": "English accent",
           "dialect": "Chinese dialect"}


@dataclass
class DesignTab:
    generate: gr.Button
    panel: OutputPanel


def build_design_tab(ctx: AppContext, view: SettingsView, history_version: gr.State) -> DesignTab:
    with gr.Row(equal_height=False, elem_classes="vd-main"):
        with gr.Column(scale=3, elem_classes="vd-inputs"):
            gr.Markdown("### 1 · Describe the voice", elem_classes="vd-step")
            attributes = []
            for row in (CATEGORIES[:3], CATEGORIES[3:]):
                with gr.Row():
                    for category in row:
                        attributes.append(gr.Dropdown([("Any", ANY), *choices(category)], value=ANY,
                                                      label=_TITLES[category], min_width=160,
                                                      elem_id=f"design-{category}"))
            instruct_view = gr.Markdown("Voice description: *(left to the model)*", elem_classes="vd-hint")
            gr.Markdown("### 2 · Text", elem_classes="vd-step")
            text = gr.Textbox(label="Text to speak", lines=5, max_length=MAX_TEXT_CHARS, elem_id="design-text")
            text_info = gr.Markdown(describe_text(""), elem_classes="vd-hint")
            with gr.Row():
                sample = gr.Dropdown(list(sample_texts()), value=None, label="Or pick a sample text")
                language = view.bind("language", gr.Dropdown(languages(), value=shown(ctx, "language"),
                                                             label="Language", filterable=True,
                                                             elem_id="design-language"))
            advanced = build_advanced(ctx, view)
            build_checks(ctx, view, "design")
            generate = gr.Button("Generate", variant="primary", interactive=False, elem_id="design-generate",
                                 size="lg")
            message = message_line("design-message")
        with gr.Column(scale=2, elem_classes="vd-output"):
            gr.Markdown("### 3 · Listen", elem_classes="vd-step")
            panel = build_output_panel(ctx, view, "design")

    for box in attributes:
        box.change(_show_instruct, attributes, instruct_view, api_visibility="private", queue=False)
    text.change(describe_text, [text, advanced.speed], text_info, api_visibility="private", queue=False)
    sample.change(lambda name: sample_texts().get(name, gr.skip()) if name else gr.skip(), sample, text,
                  api_visibility="private")
    inputs = [text, language, *attributes, *advanced.inputs, panel.speakers, panel.device, history_version]
    outputs = [*panel.outputs, advanced.seed, advanced.last_seed, history_version, message]
    generate.click(reported(_generate(ctx), outputs, reset={panel.status: ""}), inputs, outputs, api_name="design",
                   concurrency_limit=8, concurrency_id="generate", show_progress="hidden")
    return DesignTab(generate, panel)


def _show_instruct(*values) -> str:
    instruct = compose_instruct(values)
    return f"Voice description: **{instruct}**" if instruct else "Voice description: *(left to the model)*"


def _generate(ctx: AppContext):
    def run(text, language, gender, age, pitch, style, accent, dialect, speed, duration, steps, guidance, denoise,
            seed, randomize, preprocess, postprocess, pad, fade, normalize, speakers, device, history_version,
            request: gr.Request):
        if not (text or "").strip():
            raise TextInputError("Type the text to speak first.")
        instruct = compose_instruct([gender, age, pitch, style, accent, dialect])
        config = make_config(speed, duration, steps, guidance, denoise, seed, randomize, preprocess, postprocess,
                             pad, fade, normalize)
        request_ = generation.GenerationRequest(text, None, instruct, language, config,
                                                f"designed: {instruct or 'automatic'}", bool(speakers),
                                                output_device(device))
        first = True
        for outputs, saved in generation.run(ctx, request_, request.session_hash):
            seeds, message = ((config.seed, config.seed), "") if first else ((gr.skip(),) * 2, gr.skip())
            first = False
            yield (*outputs, *seeds, history_version + 1 if saved else gr.skip(), message)

    return run
