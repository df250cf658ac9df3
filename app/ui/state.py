"""Every open page shows the saved settings, so Generate always uses what the page shows.

Each widget that shows a setting is bound here once. A page is built showing the settings saved when it was
served, saves a setting when the user changes its widget, and a timer brings it the changes made in another tab or
window. The page keeps, per widget, the settings revision of the value it shows (`_PageView`), and a widget is sent
a setting only when that setting was saved after that revision: a widget whose own change was saved is never sent
that change back, and the other widgets of that setting (Steps on the Clone and the Voice design tabs) are sent it.
Saving listens to `input` (the user's own changes), never `change`, so a value sent is not saved back and a quality
mode sent does not reload the model again.

Values go only to widgets the page has shown. Gradio mounts the widgets of a closed accordion or of a tab not yet
opened only when they are first shown, and keeps a value sent to such a widget before then to apply it one settling
after it appears, over whatever was typed into it in the meantime (Gradio 6.31, the frontend's app tree:
register_component applies the props it kept). So a value sent to a hidden widget lost an edit typed the instant it
appeared: pages filled in at load lost the Steps edit of the clean-clone CI runs that way, and so did a change
another page had saved long before (3 of 3 runs). Pages are therefore built with the saved values (a page served
before a save is corrected at load), and the page says, with each request for changes, which widgets it shows and
which ones the user touched since its last request (`REPORT`): those are not sent anything by that answer, since
what it would send may be older than what they hold. A widget that appears shows what the page was served with (or
last sent) until the page asks again, one frame after it appears rather than at the next tick (`INSTALL`; 62 ms
from its appearance to the setting saved meanwhile, here); an edit typed before then stands.
Still open: an answer already on its way when the user touches a widget can replace that edit (a window of one
round trip, and only for a change saved elsewhere since the page last asked).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from ..context import AppContext
from .common import languages
from .components import out_of_bounds

SYNC_S = 2.0
DEFAULT_DEVICE = "System default"


def output_device(name: str | None) -> str | None:
    return None if not name or name == DEFAULT_DEVICE else name


def device_names(ctx: AppContext) -> list[str]:
    return [DEFAULT_DEVICE, *(d.name for d in ctx.speakers.devices)]


def shown(ctx: AppContext, name: str):
    """What the widget for setting `name` shows for the saved value."""
    s = ctx.settings
    if name == "language":
        return s.language if s.language in {value for _, value in languages()} else "auto"
    if name == "play_on_speakers":
        return ctx.speakers.available and s.play_on_speakers
    if name == "output_device":
        return s.output_device if s.output_device in device_names(ctx) else DEFAULT_DEVICE
    if name == "normalize_text":
        return s.speaks_numbers
    return getattr(s, name)


_STORED: dict[str, Callable] = {"output_device": output_device, "language": str, "play_on_speakers": bool,
                                "steps": int, "guidance": float, "denoise": bool, "preprocess": bool,
                                "postprocess": bool, "check_mode": str, "check_candidates": int,
                                "check_retries": int, "check_max_wer": float, "check_min_similarity": float,
                                "pad": float, "fade": float, "normalize_text": bool}


# The index of the bound widget a page element belongs to (`bind` marks each), or undefined.
_WIDGET = r"""const widgetOf = (node) => {
        const widget = node?.closest?.('.vd-setting');
        return widget ? Number(widget.className.match(/vd-setting-(\d+)/)[1]) : undefined;
    };"""
# Run as the page loads: it then shows the saved settings (data-vd-settings="shown" on <html>), notes which widget
# the user touches (any input, change, press or key in it) and asks for the changes as soon as a widget appears.
INSTALL = """() => {
    document.documentElement.dataset.vdSettings = 'shown';
    if (window.vdSettingsView) return;
    %s
    const view = window.vdSettingsView = {touched: new Set(), seen: new WeakSet()};
    const note = (event) => {
        const widget = widgetOf(event.target);
        if (widget !== undefined) view.touched.add(widget);
    };
    for (const type of ['input', 'change', 'pointerdown', 'keydown']) document.addEventListener(type, note, true);
    new MutationObserver(() => {
        const appeared = [...document.querySelectorAll('.vd-setting')].filter(widget => !view.seen.has(widget));
        if (!appeared.length) return;
        appeared.forEach(widget => view.seen.add(widget));
        requestAnimationFrame(() => document.getElementById('vd-settings-sync')?.click());
    }).observe(document.body, {childList: true, subtree: true});
}""" % _WIDGET
# With each request for changes, in place of its last input: the widgets the page shows, and those touched since the
# last request.
REPORT = """(...inputs) => {
    %s
    const touched = window.vdSettingsView?.touched ?? new Set();
    const report = {shown: [...document.querySelectorAll('.vd-setting')].map(widgetOf), touched: [...touched]};
    touched.clear();
    return [...inputs.slice(0, -1), report];
}""" % _WIDGET


@dataclass
class _PageView:
    """What one page shows: for each bound widget, the settings revision of its value (-1: older than any); and the
    revision it last asked at. Kept in the page's gr.State and changed in place, under `SettingsView.lock`: the
    page's requests run at the same time."""

    shows: list[int]
    revision: int = -1


@dataclass
class SettingsView:
    """The widgets that show settings: `bind` them while building the page, then `wire` once.
    Timers in `wake` are started whenever a page is shown settings saved elsewhere (the model status
    poll, since another page may have switched the quality mode)."""

    ctx: AppContext
    bound: list[tuple[str, gr.components.Component]] = field(default_factory=list)
    wake: list[gr.Timer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self):
        self.page = gr.State(lambda: _PageView([-1] * len(self.bound)))  # what this page shows
        self.report = gr.JSON(visible=False)  # filled in by REPORT

    def bind(self, name: str, widget, save: bool = True, message: gr.Markdown | None = None):
        """Show setting `name` in `widget`, saved when the user changes it unless `save` is False. A number widget
        `range_checked_by_handler` needs `message`: the line where a value past its bounds is named (and not saved)."""
        classes = [widget.elem_classes] if isinstance(widget.elem_classes, str) else widget.elem_classes or []
        widget.elem_classes = [*classes, "vd-setting", f"vd-setting-{len(self.bound)}"]  # for REPORT
        self.bound.append((name, widget))
        if save and message is not None:
            widget.input(self._bounded_saver(name, widget), [widget, self.page, message], message,
                         api_visibility="private", queue=False, show_progress="hidden")
        elif save:
            widget.input(self._saver(name, widget), [widget, self.page], None, api_visibility="private", queue=False)
        return widget

    def wire(self, blocks: gr.Blocks) -> None:
        """Build each page with the saved settings, correct it when it loads and keep it in step with other
        pages."""
        widgets = [w for _, w in self.bound]
        outputs = [*widgets, *self.wake]
        gr.Timer(SYNC_S).tick(self._sync, [self.page, self.report], outputs, js=REPORT, api_visibility="private",
                              queue=False)
        # pressed by INSTALL when a widget appears; pressed again while it runs, it runs again after (always_last)
        gr.Button(visible="hidden", elem_id="vd-settings-sync").click(
            self._sync, [self.page, self.report], outputs, js=REPORT, api_visibility="private", queue=False,
            trigger_mode="always_last")
        # A setting saved between serving the page and its load is shown when this answers; data-vd-settings="shown"
        # on <html> then says the page shows the saved settings (a setting changed before may be overwritten).
        blocks.load(self._correct, [*widgets, self.page, self.report], outputs, js=REPORT, api_visibility="private",
                    queue=False).then(None, js=INSTALL, queue=False)
        self.ctx.settings_watchers.append(lambda: self._serve_saved(blocks))

    def _serve_saved(self, blocks: gr.Blocks) -> None:
        """Pages served from now on are built showing the saved settings (Gradio serves each page a copy of the
        config it made at launch)."""
        served = {component["id"]: component["props"] for component in blocks.config["components"]}
        for name, widget in self.bound:
            widget.value = widget.postprocess(shown(self.ctx, name))  # what a config made again would hold
            served[widget._id]["value"] = widget.value

    def _correct(self, *showing_page_report):
        """A page that loads: the widgets that show a setting saved after the page was served are sent it, now if
        shown, else once they are."""
        *showing, page, report = showing_page_report
        with self.lock:
            revision = self.ctx.settings_revision
            wanted = [shown(self.ctx, name) for name, _ in self.bound]
            page.shows = [revision if value == want else -1 for value, want in zip(showing, wanted, strict=True)]
        return self._sync(page, report)

    def _sync(self, page: _PageView, report: dict | None):
        """Each widget that the page shows and the user has not touched since its last request is sent its setting
        if that was saved after what the widget shows."""
        report = report or {}
        ready = set(report.get("shown", ())) - set(report.get("touched", ()))
        with self.lock:
            sent = []
            for i, (name, _) in enumerate(self.bound):
                saved_at = self.ctx.settings_changed.get(name, 0)  # read before the value: never newer than it
                if i in ready and saved_at > page.shows[i]:
                    page.shows[i] = saved_at
                    sent.append(shown(self.ctx, name))
                else:
                    sent.append(gr.skip())
            woken = page.revision != self.ctx.settings_revision
            page.revision = self.ctx.settings_revision
        return (*sent, *(gr.Timer(active=True) if woken else gr.skip() for _ in self.wake))

    def saved(self, page: _PageView, widget, **changes) -> None:
        """Save `changes` made in `widget` of `page`: that widget shows the revision its save made (unless it was sent
        a later one meanwhile); the page's other widgets of these settings are sent them (the widgets' saves and the
        quality switch come here)."""
        revision = self.ctx.save_settings(**changes)
        index = next(i for i, (_, bound) in enumerate(self.bound) if bound is widget)
        with self.lock:
            page.shows[index] = max(page.shows[index], revision)

    def _saver(self, name: str, widget):
        store = _STORED[name]

        def save(value, page: _PageView):
            self.saved(page, widget, **{name: store(value)})

        return save

    def _bounded_saver(self, name: str, widget):
        """The saver of a widget whose bounds its handler checks: a value past them is named in the message line and
        not saved; a value within them is saved and takes that widget's own such message away."""
        save = self._saver(name, widget)
        own = f"⚠ {widget.label} must be from "

        def save_within(value, page: _PageView, shown_message: str | None):
            wrong = out_of_bounds(widget.label, widget.minimum, widget.maximum, value)
            if wrong:
                return f"⚠ {wrong}"
            save(value, page)
            return "" if (shown_message or "").startswith(own) else gr.skip()

        return save_within
