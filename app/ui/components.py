"""Input rules that Gradio components do not have on their own."""
from __future__ import annotations

import gradio as gr
from gradio_client.utils import is_http_url_like

from engine.errors import AudioInputError


def shut_accordion(label: str, elem_class: str) -> gr.Accordion:
    """An accordion that the page shows shut, with fields that hold what is typed into them the moment it is opened:
    built open and shut by the page as it appears (app/assets/accordions.js says why)."""
    return gr.Accordion(label, open=True, elem_classes=[elem_class, "vd-shut"])


# The elem class that marks a field `range_checked_by_handler`: given to its constructor, since Gradio builds a field
# anew from its constructor's arguments for a page's session whenever an event updates it (gr.skip() included), and
# an override of the instance (or a class added later) was lost with it: a Seed past its bound after a first message,
# the settings' sliders after the settings' sync, got Gradio's own pop-up.
HANDLER_CHECKED = "vd-range-by-handler"


def range_checked_by_handler(kind: type[gr.Slider] | type[gr.Number], **options) -> gr.Slider | gr.Number:
    """A `kind` field whose value outside its bounds goes through to the handler, which names the field in its
    message line (`out_of_bounds`): Gradio's own check refused it with a pop-up that named no field ("Value -1 is
    less than minimum value 0.", where two fields start at 0)."""
    for checked in (gr.Number, gr.Slider):
        if not getattr(checked.preprocess, "lets_marked_fields_through", False):
            checked.preprocess = _unchecked_when_marked(checked.preprocess)
    return kind(elem_classes=[HANDLER_CHECKED], **options)


def _unchecked_when_marked(preprocess):
    def unchecked(field, payload):
        try:
            return preprocess(field, payload)
        except gr.Error:
            if HANDLER_CHECKED in (field.elem_classes or []):
                return payload
            raise

    unchecked.lets_marked_fields_through = True
    return unchecked


def out_of_bounds(label: str, low: float, high: float, value: float | None) -> str | None:
    """What is wrong with `value` in the field `label` if it is outside [low, high]; None for a value within them or
    no value (an empty box)."""
    if value is None or low <= value <= high:
        return None
    return f"{label} must be from {_plain(low)} to {_plain(high)}, not {_plain(value)}."


def _plain(number: float) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)  # a seed's digits, not 2.14748e+09


def refuse_urls(audio: gr.Audio) -> gr.Audio:
    """Make `audio` accept only uploads and recordings: a web address sent through the API is refused
    instead of being downloaded by the server.

    (An instance override rather than a subclass: Gradio writes a .pyi stub next to the module of
    every component subclass, which must not happen inside an installed package.)
    """
    fetch = audio.async_move_resource_to_block_cache

    async def local_only(url_or_file_path):
        if url_or_file_path is not None and is_http_url_like(str(url_or_file_path)):
            raise AudioInputError("Audio from web addresses is not accepted: upload the file instead.")
        return await fetch(url_or_file_path)

    audio.async_move_resource_to_block_cache = local_only
    return audio
