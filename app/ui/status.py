"""The header: model loading progress, the backend in use, the quality-mode switch with the Realtime check's
line below it, the demo banner. A timer polls the EngineHost until the model is ready (and the Realtime check
is done), then enables every Generate button."""
from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from engine.config import Mode
from engine.errors import StorageError

from ..context import AppContext
from ..engine_host import HostState
from ..realtime_check import DONE, CheckStatus
from .state import SettingsView, shown

MODES = [(f"{Mode.HIFI.label} (FP16)", Mode.HIFI.value),
         (f"{Mode.REALTIME.label} (quantized + CUDA Graph)", Mode.REALTIME.value)]
SAME_PATH_MODES = [(mode.label, mode.value) for mode in (Mode.HIFI, Mode.REALTIME)]  # every mode runs the eager path
SAME_PATH_NOTE = ("No NVIDIA GPU here: both run the same eager FP32 path on the CPU, so switching changes nothing "
                  "and loads nothing")
EAGER = (Mode.EAGER.label, Mode.EAGER.value)
POLL_S = 0.5


@dataclass
class Header:
    status: gr.HTML
    mode: gr.Radio
    realtime_check: gr.HTML
    timer: gr.Timer
    view: SettingsView  # the mode is a setting: saved through it


def status_html(state: HostState, demo: bool) -> str:
    if state.ready:
        body = f'<span class="vd-dot vd-ready"></span>Ready · <b>{html.escape(state.message)}</b>'
    elif state.failed:
        body = f'<span class="vd-dot vd-failed"></span>Model not loaded: {html.escape(state.message)}'
    else:
        pct = max(0.0, min(1.0, state.fraction)) * 100
        body = (f'<span class="vd-dot vd-loading"></span>{html.escape(state.stage.capitalize())}: '
                f'{html.escape(state.message)}'
                f'<div class="vd-progress"><div style="width:{pct:.0f}%"></div></div>')
    demo_note = ('<div class="vd-demo">Demo model (tiny random weights): every result is noise. '
                 'Start without <code>--demo</code> for real voices.</div>') if demo else ""
    return f'<div class="vd-model-status" id="vd-model-status" data-stage="{state.stage}">{body}</div>{demo_note}'


def realtime_check_html(status: CheckStatus) -> str:
    """The Realtime check's line under the quality switch (app/realtime_check.py); empty when it does not apply."""
    line = status.line()
    if not line:
        return ""
    kind = status.result.verdict if status.state == DONE else status.state  # fine | drift | waiting | ...
    return f'<div class="vd-realtime-check vd-rtc-{kind}" data-kind="{kind}">{html.escape(line)}</div>'


def realtime_check_update(status: CheckStatus) -> gr.HTML:
    """The line, shown only when there is something to say."""
    line = realtime_check_html(status)
    return gr.HTML(line, visible=bool(line))


def keep_polling(state: HostState, check: CheckStatus) -> bool:
    """Whether the header still changes by itself: the model loads, or the Realtime check waits or runs."""
    return not state.failed and (not state.ready or check.busy)


def build_header(ctx: AppContext, view: SettingsView) -> Header:
    differ = ctx.host.modes_differ()
    choices = (MODES if differ else SAME_PATH_MODES) + ([EAGER] if ctx.settings.mode == Mode.EAGER.value else [])
    with gr.Row(elem_classes="vd-header", equal_height=True):
        with gr.Column(scale=3, min_width=280):
            gr.HTML('<div class="vd-title">VoiceDesk<span>voice cloning on your own GPU</span></div>')
        with gr.Column(scale=4, min_width=320):
            status = gr.HTML(status_html(ctx.host.state(), ctx.demo), elem_id="vd-status-box")
        with gr.Column(scale=3, min_width=300):
            label = "Quality (switching reloads the model)" if differ else "Quality"
            mode = view.bind("mode", gr.Radio(choices, value=shown(ctx, "mode"), label=label, elem_id="vd-mode",
                                              info=None if differ else SAME_PATH_NOTE),
                             save=False)  # saved by `switch`, which also reloads the model when that changes the path
            line = realtime_check_html(ctx.host.realtime_check.status())
            realtime_check = gr.HTML(line, visible=bool(line), elem_id="vd-realtime-check")
    timer = gr.Timer(POLL_S, active=True)
    view.wake.append(timer)
    return Header(status, mode, realtime_check, timer, view)


def wire_header(ctx: AppContext, header: Header, generate_buttons: list[tuple[gr.Button, gr.Textbox | None]]) -> None:
    """`generate_buttons`: each Generate button with the text box it speaks (None: it needs none); a button
    works once the model is ready and its text box has something to say."""
    buttons = [button for button, _ in generate_buttons]
    texts = [text for _, text in generate_buttons if text is not None]

    def usable(*values) -> list[gr.Button]:
        ready, given = ctx.host.state().ready, iter(values)
        return [gr.Button(interactive=ready and (text is None or bool((next(given) or "").strip())))
                for _, text in generate_buttons]

    def poll(*values):
        state, check = ctx.host.state(), ctx.host.realtime_check.status()
        return (status_html(state, ctx.demo), realtime_check_update(check), *usable(*values),
                gr.Timer(active=keep_polling(state, check)))

    def switch(mode, page):
        reloading = ctx.host.start(mode)
        try:
            header.view.saved(page, header.mode, mode=mode)
        except StorageError as err:  # the switch still happens, only not remembered
            gr.Warning(f"This mode is used now but cannot be remembered for the next start: {err}")
        if not reloading:  # the same path runs: Generate stays as it is
            return (gr.skip(),) * (len(buttons) + 3)
        return (status_html(ctx.host.state(), ctx.demo), realtime_check_update(ctx.host.realtime_check.status()),
                *[gr.Button(interactive=False) for _ in buttons], gr.Timer(active=True))

    def model_status() -> dict:
        """The model's loading stage, progress and backend; `ready` is true once Generate works."""
        state, check = ctx.host.state(), ctx.host.realtime_check.status()
        return {"stage": state.stage, "fraction": state.fraction, "message": state.message, "ready": state.ready,
                "mode": ctx.settings.mode, "demo": ctx.demo,
                "realtime_check": {"state": check.state, "line": check.line(),
                                   "verdict": check.result.verdict if check.result else None}}

    outputs = [header.status, header.realtime_check, *buttons, header.timer]
    header.timer.tick(poll, texts, outputs, api_visibility="private", queue=False)
    for text in texts:
        text.change(usable, texts, buttons, api_visibility="private", queue=False)
    header.mode.input(switch, [header.mode, header.view.page], outputs, api_name="set_mode")
    gr.api(model_status, api_name="model_status")
