"""Every open page shows the saved settings, so Generate always uses what the page shows.

Each widget that shows a setting is bound here once. A page is built showing the settings saved when it was
served, saves a setting when the user changes its widget, and a timer pushes changes made in another tab or
window: the page keeps the settings revision it last showed and asks only for newer ones.
Saving listens to `input` (the user's own changes), never `change`, so a pushed value is not saved back
and a pushed quality mode does not reload the model again.

Why pages are built with the saved values rather than filled in when they load: Gradio mounts the widgets of a
closed accordion or of a tab not yet opened only when they are first shown, and a value pushed to such a widget
before then is applied one settling of the page after it appears, over whatever the user typed into it in the
meantime (Gradio 6.31, the frontend's app tree: register_component applies the props it kept). A page filled
in at load pushed every setting into every hidden widget, so an edit typed as the Advanced settings opened was
lost, and its `input` event saved the pushed value instead (the lost Steps edit of the clean-clone CI runs).
Still open: a change another page saves is pushed to this page's widgets whether shown or not, so an edit typed
into a widget the instant it first appears can lose to that (older) change.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from ..context import AppContext
from .common import languages

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


@dataclass
class SettingsView:
    """The widgets that show settings: `bind` them while building the page, then `wire` once.
    Timers in `wake` are started whenever a page is shown settings saved elsewhere (the model status
    poll, since another page may have switched the quality mode)."""

    ctx: AppContext
    bound: list[tuple[str, gr.components.Component]] = field(default_factory=list)
    wake: list[gr.Timer] = field(default_factory=list)

    def __post_init__(self):
        self.revision = gr.State(-1)  # the settings revision this page shows

    def bind(self, name: str, widget, save: bool = True):
        """Show setting `name` in `widget`, saved when the user changes it unless `save` is False."""
        self.bound.append((name, widget))
        if save:
            widget.input(self._saver(name), [widget, self.revision], self.revision, api_visibility="private",
                         queue=False)
        return widget

    def wire(self, blocks: gr.Blocks) -> None:
        """Build each page with the saved settings, correct it when it loads and keep it in step with other
        pages."""
        widgets = [w for _, w in self.bound]
        outputs = [*widgets, self.revision, *self.wake]
        gr.Timer(SYNC_S).tick(self._sync, self.revision, outputs, api_visibility="private", queue=False)
        # A setting saved between serving the page and its load is shown when this answers; data-vd-settings="shown"
        # on <html> then says the page shows the saved settings (a setting changed before may be overwritten).
        blocks.load(self._correct, widgets, outputs, api_visibility="private", queue=False).then(
            None, js="() => { document.documentElement.dataset.vdSettings = 'shown'; }", queue=False)
        self.ctx.settings_watchers.append(lambda: self._serve_saved(blocks))

    def _serve_saved(self, blocks: gr.Blocks) -> None:
        """Pages served from now on are built showing the saved settings (Gradio serves each page a copy of the
        config it made at launch)."""
        served = {component["id"]: component["props"] for component in blocks.config["components"]}
        for name, widget in self.bound:
            widget.value = widget.postprocess(shown(self.ctx, name))  # what a config made again would hold
            served[widget._id]["value"] = widget.value

    def _correct(self, *showing):
        """A page that loads: only the settings it shows wrongly are pushed (saved after it was served), so the
        widgets it has not shown yet are left alone; it now shows the current revision."""
        revision = self.ctx.settings_revision
        wanted = [shown(self.ctx, name) for name, _ in self.bound]
        return (*(want if value != want else gr.skip() for value, want in zip(showing, wanted, strict=True)),
                revision, *(gr.Timer(active=True) for _ in self.wake))

    def _sync(self, seen: int):
        """Only the settings saved since revision `seen` are pushed: a push of the others could land on a widget
        the user is changing at that moment and be saved in place of their value."""
        revision = self.ctx.settings_revision
        if seen == revision:
            return (gr.skip(),) * (len(self.bound) + 1 + len(self.wake))
        changed = self.ctx.settings_changed
        return (*(shown(self.ctx, name) if changed.get(name, 0) > seen else gr.skip() for name, _ in self.bound),
                revision, *(gr.Timer(active=True) for _ in self.wake))

    def saved(self, seen: int, **changes):
        """Save `changes` made on a page that shows revision `seen`; returns what that page's revision becomes.
        The page now shows the revision its save made, unless another page saved something after what this page
        last showed: then it keeps its revision, and the next sync shows it that change. A save that leaves the
        page's revision behind makes its next sync push every setting back onto it, over a value the user may be
        typing at that moment (lost if that value's save reads the pushed one): the widgets' saves and the quality
        switch come here."""
        revision = self.ctx.save_settings(**changes)
        return revision if revision == seen + 1 else gr.skip()

    def _saver(self, name: str):
        store = _STORED[name]

        def save(value, seen: int):
            return self.saved(seen, **{name: store(value)})

        return save
