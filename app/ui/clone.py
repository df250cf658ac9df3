"""The Clone tab: a voice (saved, or from a recorded/uploaded clip) + text -> streamed speech."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import gradio as gr

from engine.audio.asr import asr_available
from engine.audio.io import SAMPLE_RATE, load_clip
from engine.errors import TextInputError
from engine.text.limits import MAX_TRANSCRIPT_CHARS, check_request

from .. import generation
from ..clip_check import check_file
from ..context import AppContext, checked_upload
from ..library import LibraryError
from ..waiting import in_line
from .advanced import make_config
from .common import describe_entry, literal, reference_player
from .components import refuse_urls
from .messages import message_line, reported
from .output import OUTPUTS, idle_outputs, live_start, panel_updates, show_heard_after
from .request_form import RequestForm, build_request_form
from .state import SettingsView, output_device

NEW_CLIP = "__clip__"  # the voice dropdown's value for "make a voice from the clip below"


@dataclass
class CloneTab:
    voice: gr.Dropdown
    form: RequestForm


def voice_choices(ctx: AppContext) -> list[tuple[str, str]]:
    return [("New voice from a clip", NEW_CLIP), *((e.name, e.slug) for e in ctx.library.entries())]


def saved_voice(ctx: AppContext) -> str:
    """The voice chosen last, while `voice_choices` lists it: `entry` judges that one voice as `entries` judges each,
    so the library is not listed a second time."""
    last = ctx.settings.last_voice
    if last is None:
        return NEW_CLIP
    try:
        ctx.library.entry(last)
    except LibraryError:  # deleted, renamed or damaged since it was chosen
        return NEW_CLIP
    return last


def build_clone_tab(ctx: AppContext, view: SettingsView, library_version: gr.State,
                    history_version: gr.State) -> CloneTab:
    start_voice = saved_voice(ctx)
    start_entry = ctx.library.entry(start_voice) if start_voice != NEW_CLIP else None
    with gr.Row(equal_height=False, elem_classes="vd-main"):
        with gr.Column(scale=4, elem_classes="vd-inputs"):
            gr.Markdown("### 1 · Voice", elem_classes="vd-step")
            # Custom values: a voice saved after this page (or API session) opened is still usable; the
            # library says when a slug names no voice.
            voice = gr.Dropdown(voice_choices(ctx), value=start_voice, label="Voice", elem_id="clone-voice",
                                allow_custom_value=True)
            with gr.Group(visible=start_voice != NEW_CLIP, elem_classes="vd-saved-voice") as saved_box:
                saved_info = gr.Markdown(describe_entry(start_entry) if start_entry else "")
                saved_preview = gr.HTML(reference_player(start_entry), elem_id="clone-saved-reference")
            with gr.Group(visible=start_voice == NEW_CLIP, elem_classes="vd-clip") as clip_box:
                reference = refuse_urls(gr.Audio(
                    sources=["microphone", "upload"], type="filepath", editable=True, elem_id="clone-reference",
                    buttons=["download"],  # no Share: it posts to Hugging Face Spaces, which a local app is not
                    label="Reference clip: record or upload 3–10 s of clear speech",
                    waveform_options=gr.WaveformOptions(sample_rate=24000, show_recording_waveform=True)))
                gr.HTML('<div class="vd-hint vd-warning" id="vd-mic-note" hidden></div>')  # microphone.js
                clip_hint = gr.Markdown(elem_classes="vd-hint", elem_id="clone-clip-hint")
                transcript = gr.Textbox(label="What is said in the clip", lines=2, elem_id="clone-transcript",
                                        max_length=MAX_TRANSCRIPT_CHARS,
                                        placeholder=_transcript_hint())
                with gr.Row(equal_height=True, elem_classes="vd-save-row"):
                    voice_name = gr.Textbox(show_label=False, container=False, scale=3, max_length=60,
                                            placeholder="Name it to keep it, e.g. Grandpa",
                                            elem_id="clone-voice-name")
                    save = gr.Button("Save voice", scale=1, min_width=120, elem_id="clone-save")
                save_message = message_line("clone-save-message")
        form = build_request_form(ctx, view, "clone")

    # -- events -----------------------------------------------------------------------------------
    reference.change(check_file, reference, clip_hint, api_visibility="private", queue=False)
    voice.change(_show_voice(ctx), voice, [saved_box, clip_box, saved_info, saved_preview],
                 api_visibility="private")
    save_outputs = [voice, voice_name, transcript, library_version, save_message]
    save.click(reported(_save_voice(ctx), save_outputs),
               [voice_name, reference, transcript, form.language, form.advanced.preprocess, library_version],
               save_outputs, api_name="save_voice", show_progress="hidden")

    panel, advanced = form.panel, form.advanced
    inputs = [voice, reference, transcript, form.text, form.language, *advanced.inputs, panel.speakers, panel.device]
    outputs = [*panel.outputs, transcript, advanced.seed, advanced.last_seed, history_version, form.message]
    generate = form.generate.click(reported(_generate(ctx), outputs, reset={panel.status: ""}),
                                   inputs + [history_version, panel.live_id], outputs, js=live_start("clone"),
                                   api_name="clone", concurrency_limit=8, concurrency_id="generate",
                                   show_progress="hidden")
    show_heard_after(ctx, panel, generate)
    return CloneTab(voice, form)


def _transcript_hint() -> str:
    if asr_available():
        return "Leave empty to transcribe it automatically (Whisper), or type it for the best result"
    return "Type exactly what is said (no speech recogniser is installed to do it automatically)"


def _show_voice(ctx: AppContext):
    def show(slug: str):
        if not slug or slug == NEW_CLIP:
            return gr.Group(visible=False), gr.Group(visible=True), "", None
        try:
            entry = ctx.library.entry(slug)
        except LibraryError as err:  # deleted or renamed since this page listed it (in another tab), or damaged
            return gr.Group(visible=True), gr.Group(visible=False), f"⚠ {err}", None
        ctx.save_settings(last_voice=slug)
        return gr.Group(visible=True), gr.Group(visible=False), describe_entry(entry), reference_player(entry)

    return show


def _save_voice(ctx: AppContext):
    def save(name, reference, transcript, language, preprocess, version, request: gr.Request):
        # the quick checks first, in the order of the form: a name (not taken), then a clip
        ctx.library.unused_name(name)
        clip = checked_upload(reference, ctx.upload_root)
        yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), "Saving the voice…"
        voice = yield from ctx.voice_from_clip(
            str(clip), transcript, preprocess, owner=request.session_hash,
            show=lambda place: (gr.skip(), gr.skip(), gr.skip(), gr.skip(), f"Saving the voice… {in_line(place)}"))
        decoded = load_clip(clip)  # mono 24 kHz, what the voice was made from
        entry = ctx.library.save(name, voice, reference=(decoded.samples, SAMPLE_RATE), language=language)
        yield (gr.Dropdown(choices=voice_choices(ctx), value=entry.slug), "", voice.transcript or gr.skip(),
               version + 1, f"✓ Saved the voice '{literal(entry.name)}'.")

    return save


EXTRAS = 5  # the outputs after the output panel: transcript, two seed boxes, history version, message


def _status_only(status: str) -> tuple:
    """An update of Generate's outputs that changes only the panel's status line."""
    panel = [gr.skip()] * len(OUTPUTS)
    panel[OUTPUTS.index("status")] = status
    return (*panel, *[gr.skip()] * EXTRAS)


def _generate(ctx: AppContext):
    def run(voice_slug, reference, transcript, text, language, speed, duration, steps, guidance, denoise, seed,
            randomize, preprocess, postprocess, pad, fade, normalize, speakers, device, history_version, live_id,
            request: gr.Request):
        # the page listens under `live_id` (live_player.js): it hears the samples, or why there are none
        with ctx.live_audio.publishing(live_id) as live:
            if not (text or "").strip():
                raise TextInputError("Type the text to speak first.")
            check_request(text, transcript)  # before the voice is made
            config = make_config(speed, duration, steps, guidance, denoise, seed, randomize, preprocess,
                                 postprocess, pad, fade, normalize)
            owner = request.session_hash
            yield (*idle_outputs("Preparing the voice…"), *[gr.skip()] * (EXTRAS - 1), "")
            from_clip = not voice_slug or voice_slug == NEW_CLIP
            # Making the voice, then speaking: nobody who asked later slips in between. While the voice waits in
            # line its place is shown; if the page goes away then, Gradio closes this generator, which drops the
            # voice's job and ends the turn.
            with ctx.worker.turn(owner):
                if from_clip:
                    voice = yield from ctx.voice_from_clip(
                        reference, transcript, preprocess, owner=owner,
                        show=lambda place: _status_only(f"Preparing the voice… {in_line(place)}"))
                    label = "reference clip"
                else:
                    saved, voice = ctx.library.entry_and_voice(voice_slug)
                    label = saved.name
                request_ = generation.GenerationRequest(text, voice, None, language, config, label, bool(speakers),
                                                        output_device(device))
                runs = panel_updates(ctx, generation.run(ctx, request_, owner, live))
                started = next(runs)  # the job is in line
            # a transcript made by speech recognition goes back into the box, to be checked and corrected
            filled = voice.transcript if from_clip and not (transcript or "").strip() else gr.skip()
            first = True
            for outputs, saved in itertools.chain([started], runs):
                extras = (filled, config.seed, config.seed) if first else (gr.skip(),) * 3
                first = False
                yield (*outputs, *extras, history_version + 1 if saved else gr.skip(), gr.skip())

    return run
