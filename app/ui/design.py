"""The Voice design tab: describe a voice (gender, age, pitch, style, accent or dialect) instead of
cloning one."""
from __future__ import annotations

import gradio as gr

from engine.audio.io import SAMPLE_RATE, load_clip
from engine.errors import TextInputError, VoiceDeskError
from engine.text.instruct import CATEGORIES, choices, compose_instruct

from .. import generation
from ..context import AppContext
from ..waiting import in_line
from .advanced import make_config
from .common import literal
from .messages import message_line, reported
from .output import live_start, panel_updates, show_heard_after
from .request_form import RequestForm, build_request_form
from .state import SettingsView, output_device

ANY = ""  # a category left to the model
DESIGNED = "designed: "  # how a designed voice's results are labelled (the History's "Use this text" reads it)
MAX_KEPT_S = 20.0  # a longer result would be cut when it becomes a reference, and no longer match its text
_TITLES = {"gender": "Gender", "age": "Age", "pitch": "Pitch", "style": "Style", "accent": "English accent",
           "dialect": "Chinese dialect"}


def build_design_tab(ctx: AppContext, view: SettingsView, history_version: gr.State,
                     library_version: gr.State) -> RequestForm:
    with gr.Row(equal_height=False, elem_classes="vd-main"):
        with gr.Column(scale=4, elem_classes="vd-inputs"):
            gr.Markdown("### 1 · Describe the voice", elem_classes="vd-step")
            attributes = []
            for row in (CATEGORIES[i:i + 2] for i in range(0, len(CATEGORIES), 2)):  # two a row: a narrow column
                with gr.Row():
                    for category in row:
                        attributes.append(gr.Dropdown([("Any", ANY), *choices(category)], value=ANY,
                                                      label=_TITLES[category], min_width=160,
                                                      elem_id=f"design-{category}"))
            instruct_view = gr.Markdown("Voice description: *(left to the model)*", elem_classes="vd-hint")
            gr.Markdown("Liked the voice of the last result? Keep it: it joins your saved voices.",
                        elem_classes="vd-hint")
            with gr.Row(equal_height=True, elem_classes="vd-save-row"):
                voice_name = gr.Textbox(show_label=False, container=False, scale=3, max_length=60,
                                        placeholder="Name it to keep it", elem_id="design-voice-name")
                save = gr.Button("Save voice", scale=1, min_width=120, elem_id="design-save")
            save_message = message_line("design-save-message")
        form = build_request_form(ctx, view, "design")

    for box in attributes:
        box.change(_show_instruct, attributes, instruct_view, api_visibility="private", queue=False)
    save_outputs = [voice_name, library_version, save_message]
    save.click(reported(_save_voice(ctx), save_outputs), [voice_name, library_version], save_outputs,
               api_name="save_designed_voice", show_progress="hidden")
    panel, advanced = form.panel, form.advanced
    inputs = [form.text, form.language, *attributes, *advanced.inputs, panel.speakers, panel.device, history_version,
              panel.live_id]
    outputs = [*panel.outputs, advanced.seed, advanced.last_seed, history_version, form.message]
    generate = form.generate.click(reported(_generate(ctx), outputs, reset={panel.status: ""}), inputs, outputs,
                                   js=live_start("design"), api_name="design", concurrency_limit=8,
                                   concurrency_id="generate", show_progress="hidden")
    show_heard_after(ctx, panel, generate)
    return form


def _show_instruct(*values) -> str:
    instruct = compose_instruct(values)
    return f"Voice description: **{instruct}**" if instruct else "Voice description: *(left to the model)*"


def _save_voice(ctx: AppContext):
    """Keep the voice of this page's last designed result: that result becomes its reference, its text the
    transcript."""
    def save(name, version, request: gr.Request):
        ctx.library.unused_name(name)
        metrics = ctx.live.get(request.session_hash)
        entry_id = metrics.history_id if metrics is not None else None
        entry = ctx.history.get(entry_id) if entry_id else None
        if entry is None or not entry.meta.get("voice", "").startswith(DESIGNED):
            raise VoiceDeskError("Generate with a described voice first: its last result is what is kept.")
        if entry.meta.get("audio_s", 0) > MAX_KEPT_S:
            raise VoiceDeskError(f"The last result is {entry.meta['audio_s']:.0f} s long; a voice is kept from at "
                                 f"most {MAX_KEPT_S:.0f} s: generate a sentence or two, then save.")
        yield gr.skip(), gr.skip(), "Saving the voice…"
        engine = ctx.host.engine
        job = ctx.worker.submit(lambda cancel: engine.voice_from_clip(str(entry.audio), entry.text, True),
                                owner=request.session_hash)
        voice = yield from ctx.worker.result(
            job, show=lambda place: (gr.skip(), gr.skip(), f"Saving the voice… {in_line(place)}"))
        decoded = load_clip(entry.audio)
        saved = ctx.library.save(name, voice, reference=(decoded.samples, SAMPLE_RATE),
                                 language=entry.meta.get("language"))
        yield "", version + 1, f"✓ Saved the voice '{literal(saved.name)}': pick it in the Clone tab."

    return save


def _generate(ctx: AppContext):
    def run(text, language, gender, age, pitch, style, accent, dialect, speed, duration, steps, guidance, denoise,
            seed, randomize, preprocess, postprocess, pad, fade, normalize, speakers, device, history_version,
            live_id, request: gr.Request):
        # the page listens under `live_id` (live_player.js): it hears the samples, or why there are none
        with ctx.live_audio.publishing(live_id) as live:
            if not (text or "").strip():
                raise TextInputError("Type the text to speak first.")
            instruct = compose_instruct([gender, age, pitch, style, accent, dialect])
            config = make_config(speed, duration, steps, guidance, denoise, seed, randomize, preprocess, postprocess,
                                 pad, fade, normalize)
            request_ = generation.GenerationRequest(text, None, instruct, language, config,
                                                    f"{DESIGNED}{instruct or 'automatic'}", bool(speakers),
                                                    output_device(device))
            first = True
            for outputs, saved in panel_updates(ctx, generation.run(ctx, request_, request.session_hash, live)):
                seeds, message = ((config.seed, config.seed), "") if first else ((gr.skip(),) * 2, gr.skip())
                first = False
                yield (*outputs, *seeds, history_version + 1 if saved else gr.skip(), message)

    return run
