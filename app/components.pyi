"""Gradio components with the app's input rules built in."""
from __future__ import annotations

from pathlib import Path

import gradio as gr
from gradio_client.utils import is_http_url_like

from engine.errors import AudioInputError

from gradio.events import Dependency

class LocalAudio(gr.Audio):
    """An audio input that accepts only uploads and recordings: a web address sent through the API is
    refused instead of being downloaded by the server."""

    is_template = True  # drawn by the frontend's ordinary Audio component

    async def async_move_resource_to_block_cache(self, url_or_file_path: str | Path | None) -> str | None:
        if url_or_file_path is not None and is_http_url_like(str(url_or_file_path)):
            raise AudioInputError("Audio from web addresses is not accepted: upload the file instead.")
        return await super().async_move_resource_to_block_cache(url_or_file_path)
    from typing import Callable, Literal, Sequence, Any, TYPE_CHECKING
    from gradio.blocks import Block
    if TYPE_CHECKING:
        from gradio.components import Timer
        from gradio.components.base import Component