"""Small pieces several tabs use: sample texts, the language list, the text counter, saved-voice details."""
from __future__ import annotations

import functools
import html
import json
import re

from engine.text.duration import text_weight, weight_per_second
from engine.text.languages import language_choices
from engine.text.limits import MAX_TEXT_CHARS

from .. import ASSETS
from ..downloads import voice_archive_url, voice_reference_url
from ..library import VoiceEntry


@functools.lru_cache(maxsize=1)
def sample_texts() -> dict[str, str]:
    return json.loads((ASSETS / "sample_texts.json").read_text(encoding="utf-8"))


COMMON_LANGUAGES = ("en", "zh", "es", "fr", "de", "ja", "ko", "pt", "ru", "it", "arb", "hi")  # listed first


@functools.lru_cache(maxsize=1)
def languages() -> list[tuple[str, str]]:
    """Auto, the common languages, then every other one by name (each once)."""
    auto, *rest = language_choices()
    by_id = {value: label for label, value in rest}
    common = [(by_id[i], i) for i in COMMON_LANGUAGES]
    return [auto, *common, *(choice for choice in rest if choice[1] not in COMMON_LANGUAGES)]


def describe_text(text: str, speed: float = 1.0) -> str:
    """ "123 characters · about 9 s of speech" (the model's own length estimate, at this speed)."""
    text = text or ""
    if not text.strip():
        return f"0 / {MAX_TEXT_CHARS:,} characters"
    if len(text) > MAX_TEXT_CHARS:
        return (f"⚠ {len(text):,} / {MAX_TEXT_CHARS:,} characters: {len(text) - MAX_TEXT_CHARS:,} over the limit. "
                "Shorten the text or split it (the Studio tab reads long scripts).")
    seconds = text_weight(text) / weight_per_second() / max(float(speed or 1.0), 0.1)
    return f"{len(text):,} / {MAX_TEXT_CHARS:,} characters · about {seconds:.0f} s of speech"


def literal(text: str) -> str:
    """`text` for a Markdown component, shown as typed: its HTML and Markdown marks are escaped (a voice named
    'Ann <b>' or '*Ann*' is shown so, not as bold or italic)."""
    return re.sub(r"([\\`*_{}\[\]#|~$])", r"\\\1", html.escape(text, quote=False))


def describe_entry(entry: VoiceEntry) -> str:
    said = literal(entry.transcript.replace("\n", " ")) or "(no transcript)"
    return f"**{literal(entry.name)}** · {entry.seconds:.1f} s · saved {entry.created[:10]}\n\n> {said}"


def reference_player(entry: VoiceEntry | None) -> str:
    """A player for a saved voice's reference clip, fetched from the library when it plays: samples handed
    to Gradio would be copied into its cache, where they would outlive the voice."""
    if entry is None or entry.reference is None:
        return ""
    src = html.escape(voice_reference_url(entry.slug))
    return f'<audio class="vd-reference" controls preload="none" src="{src}"></audio>'


def export_link(entry: VoiceEntry) -> str:
    """A link that makes the voice's .zip when clicked (nothing is written beforehand)."""
    return f'<a class="vd-link" href="{html.escape(voice_archive_url(entry.slug))}" download>Export (.zip)</a>'


def shortened(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at most, with an ellipsis where it was cut (a table cell)."""
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"
