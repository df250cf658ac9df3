"""A request's text as its audio says it: what a plan reads (engine/lm/plan.py), and the transcript of a voice made
from that audio (the Studio's made voices)."""
from __future__ import annotations

import threading

from engine.text.clean import clean_text
from engine.text.normalize import normalize_text


def spoken_text(text: str, lang_id: str | None, *, normalize: bool, cancel: threading.Event | None = None) -> str:
    """`text` cleaned and, with `normalize`, its numbers, dates and currency in words for `lang_id` (a resolved
    language id, engine/text/languages.py; None: detected), as upstream's generate(normalize_text=...) reads it
    before anything else. Raises Cancelled as soon as `cancel` is set during the normalisation."""
    text = clean_text(text)
    return normalize_text(text, lang_id, cancel) if normalize else text
