"""The output panel shared by the Clone and Voice design tabs: status, metrics, the checks' badge, speaker
playback, the finished result's player, downloads, Stop. The sound while it is made takes the live path
(app/live.py, live_player.js): Generate's `js` step starts it in the page (`live_start`) and hands the
handler its live id (`OutputPanel.live_id`)."""
from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass

import gradio as gr

from ..checks import badge_html
from ..context import AppContext
from ..downloads import result_url
from ..generation import Progress
from ..metrics import empty_html
from .state import SettingsView, device_names, shown

OUTPUTS = ("audio", "status", "metrics_html", "metrics_json", "downloads", "checks_html", "checks_json")


@dataclass
class OutputPanel:
    audio: gr.Audio
    status: gr.Markdown
    metrics_html: gr.HTML
    metrics_json: gr.JSON
    downloads: gr.HTML
    checks_html: gr.HTML
    checks_json: gr.JSON
    speakers: gr.Checkbox
    device: gr.Dropdown
    stop: gr.Button
    live_id: gr.Textbox  # Generate's last input: the id the page listens under
    heard: gr.Textbox  # the page's first-sound report (live_player.js)

    @property
    def outputs(self) -> list:
        """In OUTPUTS order."""
        return [self.audio, self.status, self.metrics_html, self.metrics_json, self.downloads,
                self.checks_html, self.checks_json]


def build_output_panel(ctx: AppContext, view: SettingsView, prefix: str) -> OutputPanel:
    audio = gr.Audio(label="Result", type="filepath", interactive=False, elem_id=f"{prefix}-result",
                     elem_classes="vd-result", buttons=[],
                     waveform_options=gr.WaveformOptions(show_recording_waveform=False))
    status = gr.Markdown("", elem_classes="vd-status", elem_id=f"{prefix}-status")
    metrics_html = gr.HTML(empty_html(), elem_classes="vd-metrics-box")
    metrics_json = gr.JSON(visible=False, label="metrics")
    checks_html = gr.HTML("", elem_id=f"{prefix}-checks", elem_classes="vd-checks-box")
    checks_json = gr.JSON(visible=False, label="checks")  # the scores, for API clients
    downloads = gr.HTML(download_links(None), elem_id=f"{prefix}-downloads")
    heard = gr.Textbox(visible="hidden", elem_id=f"{prefix}-heard")  # filled by live_player.js
    live_id = gr.Textbox("", visible=False)  # set by Generate's js step (live_start)
    with gr.Group(elem_classes="vd-speakers"):
        speakers = view.bind("play_on_speakers", gr.Checkbox(
            label="Play on this computer's speakers", interactive=ctx.speakers.available,
            value=shown(ctx, "play_on_speakers"), info=None if ctx.speakers.available else ctx.speakers.reason))
        device = view.bind("output_device", gr.Dropdown(
            device_names(ctx), value=shown(ctx, "output_device"), label="Output device",
            visible=ctx.speakers.available, interactive=True))
    stop = gr.Button("Stop", variant="stop", elem_id=f"{prefix}-stop")

    stop.click(stop_handler(ctx), live_id, status, api_name=f"{prefix}_stop", js=stop_js(prefix))
    heard.change(_heard_handler(ctx), heard, metrics_html, api_visibility="private", queue=False)
    return OutputPanel(audio, status, metrics_html, metrics_json, downloads, checks_html, checks_json, speakers,
                       device, stop, live_id, heard)


def show_heard_after(ctx: AppContext, panel: OutputPanel, generate: gr.events.Dependency) -> None:
    """Once the page has shown all of Generate's outputs, the first-sound figure is shown again. A figure that
    reaches the app after the generation's last update was made is answered at once, but that update can reach the
    page after the answer (another connection), and Gradio shows it once more at the generation's end: the figure's
    tile went back to "—" for good."""
    generate.then(_heard_handler(ctx), panel.heard, panel.metrics_html, api_visibility="private", queue=False)


def live_start(prefix: str) -> str:
    """Generate's `js` step: runs in the page at the click (only when the click starts a generation), asks for the
    audio at once and puts the new live id in the last input; without the page's player, no id."""
    return (f"(...inputs) => [...inputs.slice(0, -1), "
            f"window.voicedeskLive ? window.voicedeskLive.start('{prefix}') : '']")


def panel_updates(ctx: AppContext, progress: Iterator[Progress]) -> Iterator[tuple[tuple, bool]]:
    """A generation's progress (app/generation.run) as updates of the panel's outputs, in OUTPUTS order, each
    with whether it is the finished result, now stored in the history (then in the result's player)."""
    for step in progress:
        yield _panel_update(ctx, step), step.saved


def idle_outputs(status: str = "") -> tuple:
    """The output panel reset for a new request."""
    return None, status, empty_html(), None, download_links(None), "", None


def _panel_update(ctx: AppContext, step: Progress) -> tuple:
    skip = gr.skip()
    # the stored file, where it is (served from the history's folder): the parts were heard live
    audio = str(ctx.history.get(step.entry_id).audio) if step.saved else skip
    if step.phase == "finished" and not step.checked:
        checks = ("", None)  # this generation is not checked: clear the last one's badge
    elif step.phase in ("part", "finished") and step.checked:
        checks = (badge_html(step.checks["parts"], step.checks["skipped"]), step.checks)
    else:
        checks = (skip, skip)
    downloads = download_links(step.entry_id) if step.saved else skip
    return (audio, step.status, step.metrics.to_html(), step.metrics.to_json(), downloads, *checks)


def download_links(entry_id: str | None) -> str:
    """Links that make a stored result's WAV or FLAC when clicked (greyed out until there is one)."""
    links = []
    for fmt in ("wav", "flac"):
        label = f"Download {fmt.upper()}"
        links.append(f'<span class="vd-link vd-off">{label}</span>' if entry_id is None else
                     f'<a class="vd-link" href="{html.escape(result_url(entry_id, fmt))}" download>{label}</a>')
    return f'<div class="vd-downloads">{"".join(links)}</div>'


def _heard_handler(ctx: AppContext):
    def heard(report: str, request: gr.Request):
        """The page's own time from the click on Generate to the first sound played, as "<live id> <ms>": taken
        only for the generation it names (a report may reach the app after the page's next generation began)."""
        metrics = ctx.live.get(request.session_hash)
        live_id, _, milliseconds = (report or "").partition(" ")
        try:
            seconds = float(milliseconds) / 1000
        except ValueError:
            return gr.skip()
        if metrics is None or metrics.live_id != live_id or not 0 < seconds < 3600:
            return gr.skip()
        with metrics.lock:
            metrics.heard_first_audio_s = seconds
            entry_id = metrics.history_id
        if entry_id is not None:  # the generation was stored before the sound started
            ctx.history.update(entry_id, heard_first_audio_s=seconds)
        return metrics.to_html()

    return heard


def stop_js(prefix: str) -> str:
    """Stop's `js` step: the live id of the panel's last Generate (live_player.js), for the handler."""
    return f"() => [window.voicedeskLive ? window.voicedeskLive.latest('{prefix}') : '']"


def stop_handler(ctx: AppContext):
    """Stop the session's generation (its running job at the next step, its waiting ones at once) and, given the
    page's `live_id` of it, also one whose handler has not begun: a Stop clicked at once on a busy computer comes
    before the job is there to cancel (it stops as its handler takes the id)."""
    def stop(live_id: str | None = None, request: gr.Request = None) -> str:
        if live_id:
            ctx.live_audio.stop(live_id)
        stopped = ctx.worker.cancel(request.session_hash)
        return "Stopping…" if stopped else gr.skip()

    return stop
