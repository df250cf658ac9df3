"""Input rules that Gradio components do not have on their own."""
from __future__ import annotations

import gradio as gr
from gradio_client.utils import is_http_url_like

from engine.errors import AudioInputError


def shut_accordion(label: str, elem_class: str) -> gr.Accordion:
    """An accordion that the page shows shut, with fields that hold what is typed into them the moment it is opened:
    built open and shut by the page as it appears (app/assets/accordions.js says why)."""
    return gr.Accordion(label, open=True, elem_classes=[elem_class, "vd-shut"])


def range_checked_by_handler(field: gr.Slider | gr.Number) -> gr.Slider | gr.Number:
    """Let a value outside `field`'s bounds through to the handler, which names the field in its message line
    (`advanced.check_limits`): Gradio's own check refused it with a pop-up that named no field ("Value -1 is less
    than minimum value 0.", where two fields start at 0). An instance override, as `refuse_urls` is, so it holds only
    for a field that no event updates with new properties (Gradio makes the updated field anew)."""
    preprocess = field.preprocess

    def unchecked(payload):
        try:
            return preprocess(payload)
        except gr.Error:
            return payload

    field.preprocess = unchecked
    return field


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
