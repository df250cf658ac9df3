"""Advanced generation settings (one accordion per tab) and their translation to a GenerationConfig."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from engine.config import SETTING_RANGES, GenerationConfig
from engine.errors import SettingError
from engine.text.normalize import INSTALL_HINT, normalize_available

from ..context import AppContext
from ..settings import MAX_PICKED_SEED, RANGES, random_seed
from .components import out_of_bounds, range_checked_by_handler, shut_accordion
from .state import SettingsView, shown

# each number field's label and bounds (inclusive): the fields show them, the handler checks them (`check_limits`; the
# settings' sliders also as they are saved, `SettingsView.bind`).
LIMITS = {"speed": ("Speed", 0.5, 1.5), "duration": ("Duration (s)", 0, SETTING_RANGES["duration"][2]),
          "steps": ("Steps", *RANGES["steps"]), "guidance": ("Guidance", *RANGES["guidance"]),
          "seed": ("Seed", 0, MAX_PICKED_SEED), "pad": ("Silence around (s)", *RANGES["pad"]),
          "fade": ("Fade (s)", *RANGES["fade"])}


@dataclass
class AdvancedSettings:
    speed: gr.Slider
    duration: gr.Number
    steps: gr.Slider
    guidance: gr.Slider
    denoise: gr.Checkbox
    seed: gr.Number
    randomize: gr.Checkbox
    preprocess: gr.Checkbox
    postprocess: gr.Checkbox
    pad: gr.Slider
    fade: gr.Slider
    normalize: gr.Checkbox
    last_seed: gr.State

    @property
    def inputs(self) -> list:
        """In `make_config` argument order."""
        return [self.speed, self.duration, self.steps, self.guidance, self.denoise, self.seed, self.randomize,
                self.preprocess, self.postprocess, self.pad, self.fade, self.normalize]


def build_advanced(ctx: AppContext, view: SettingsView, message: gr.Markdown) -> AdvancedSettings:
    """The accordion under Generate, whose `message` line names a setting typed past its bounds."""
    with shut_accordion("Advanced settings", "vd-advanced"):
        with gr.Row():
            speed = _number(gr.Slider, "speed", value=1.0, step=0.05, info="1.0 = natural pace")
            duration = _number(gr.Number, "duration", value=0, info="0 = automatic; a fixed length overrides speed")
        with gr.Row():
            steps = view.bind("steps", _number(
                gr.Slider, "steps", value=shown(ctx, "steps"), step=1,
                info="diffusion steps: fewer is faster, 32 is the model's default"), message=message)
            guidance = view.bind("guidance", _number(
                gr.Slider, "guidance", value=shown(ctx, "guidance"), step=0.1,
                info="how strongly to follow the text and voice"), message=message)
        with gr.Row(equal_height=True, elem_classes="vd-seed-row"):
            seed = _number(gr.Number, "seed", value=0, precision=0, scale=2)
            randomize = gr.Checkbox(True, label="New random seed each time", scale=2)
            use_last = gr.Button("Use last seed", size="sm", scale=1, min_width=110)
        with gr.Row():  # two a row: the column is narrow
            denoise = view.bind("denoise", gr.Checkbox(shown(ctx, "denoise"), label="Denoise",
                                                       info="ask the model for clean speech"))
            preprocess = view.bind("preprocess", gr.Checkbox(shown(ctx, "preprocess"), label="Clean up the reference",
                                                             info="trim silences and overlong clips"))
        with gr.Row():
            postprocess = view.bind("postprocess", gr.Checkbox(shown(ctx, "postprocess"), label="Tidy the output",
                                                               info="shorten long silences"))
            installed = normalize_available()
            normalize = view.bind("normalize_text", gr.Checkbox(
                shown(ctx, "normalize_text"), label="Speak numbers and dates", interactive=installed,
                info="'$5 on 3/14' is read as 'five dollars on March fourteenth'" if installed
                else f"needs the text normalisation package: {INSTALL_HINT}"))
        with gr.Row():
            pad = view.bind("pad", _number(gr.Slider, "pad", value=shown(ctx, "pad"), step=0.05,
                                           info="before and after the audio"), message=message)
            fade = view.bind("fade", _number(gr.Slider, "fade", value=shown(ctx, "fade"), step=0.01,
                                             info="soft start and end; 0 = none"), message=message)
    last_seed = gr.State(None)

    use_last.click(lambda last, current: (gr.skip() if last is None else last, False), [last_seed, seed],
                   [seed, randomize], api_visibility="private")
    return AdvancedSettings(speed, duration, steps, guidance, denoise, seed, randomize, preprocess, postprocess,
                            pad, fade, normalize, last_seed)


def _number(kind: type[gr.Slider] | type[gr.Number], name: str, **options) -> gr.Slider | gr.Number:
    label, low, high = LIMITS[name]
    return range_checked_by_handler(kind, minimum=low, maximum=high, label=label, **options)


def check_limits(**values) -> None:
    """Raise SettingError naming the first field (by `LIMITS` name) whose value is outside its bounds."""
    for name, value in values.items():
        wrong = out_of_bounds(*LIMITS[name], value)
        if wrong:
            raise SettingError(wrong)


def make_config(speed, duration, steps, guidance, denoise, seed, randomize, preprocess, postprocess,
                pad=0.1, fade=0.1, normalize=False) -> GenerationConfig:
    """The GenerationConfig for these widget values, each within its field's bounds; a random seed is drawn here so
    it can be shown."""
    check_limits(speed=speed, duration=duration, steps=steps, guidance=guidance, seed=None if randomize else seed,
                 pad=pad, fade=fade)
    chosen = random_seed() if randomize or seed is None else int(seed)
    return GenerationConfig(
        num_step=int(steps), guidance_scale=float(guidance), denoise=bool(denoise),
        preprocess_prompt=bool(preprocess), postprocess_output=bool(postprocess),
        speed=None if abs(float(speed) - 1.0) < 1e-6 else float(speed),
        duration=float(duration) if duration and duration > 0 else None, seed=chosen,
        pad_duration=float(pad), fade_duration=float(fade), normalize_text=bool(normalize))
