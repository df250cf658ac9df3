"""Text cleanup before synthesis: our `clean_text`, and upstream's prompt text (`combine_text`,
`add_punctuation`, reproduced from OmniVoice 0.2.1 exactly: the model was trained on text shaped this way).
`clean_text` never drops or reorders a visible character.
"""
from __future__ import annotations

import re

from engine.errors import TextInputError

_HAN = re.compile("[\u4e00-\u9fff]")


def has_chinese(text: str) -> bool:
    """True if the text holds a CJK Unified Ideograph (upstream's test for "Chinese text")."""
    return _HAN.search(text) is not None


def require_text(text: object) -> str:
    if not isinstance(text, str):
        raise TextInputError(f"The text to speak must be a string, not {type(text).__name__}.")
    if not text.strip():
        raise TextInputError("There is no text to speak: type or paste some text first.")
    return text


# ---------------------------------------------------------------------------------------------
# Cleaning

# Control characters other than tab, newline and carriage return (upstream's prompt shaping deals
# with those three), and lone surrogates, which cannot even be encoded.
_UNSPEAKABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_LONE_SURROGATES = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """`text` without lone surrogates (half of a UTF-16 pair: JSON from a browser or a client can carry one, UTF-8
    cannot), as `clean_text` drops them from what is spoken: what a file can store of it."""
    return _LONE_SURROGATES.sub("", text)


def clean_text(text: str) -> str:
    """Remove control characters that no speaker reads and that upstream does not handle.

    Tabs, newlines and carriage returns stay (upstream's own prompt shaping deals with them);
    other control characters that separate words become a space, the rest and lone surrogates
    go. Everything else — emoji, every script, combining marks, zero-width joiners — is kept as
    is, with no Unicode normalisation, so duration estimates and token ids match upstream.

    Raises
    ------
    TextInputError
        If the text is not a string or holds nothing but whitespace.
    """
    # A form feed or a record separator still separates two words.
    cleaned = _UNSPEAKABLE.sub(lambda m: " " if m.group().isspace() else "", require_text(text))
    return require_text(cleaned)


# ---------------------------------------------------------------------------------------------
# Upstream's prompt text

_LINE_BREAKS = re.compile(r"[\r\n]+")
_BLANK_RUNS = re.compile(r"[ \t]+")
_SPACE_BESIDE_HAN = re.compile(r"(?<=[\u4e00-\u9fff])\s+|\s+(?=[\u4e00-\u9fff])")
_FULLWIDTH_PARENS = str.maketrans("\uff08\uff09", "()")


def combine_text(text: str, ref_text: str | None = None) -> str:
    """The text the model reads: reference transcript, a space, then the target text.

    Line breaks are deleted (not replaced), full-width parentheses become ASCII, runs of spaces
    and tabs become one space, and whitespace next to a Han character is removed.
    """
    joined = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    joined = _LINE_BREAKS.sub("", joined).translate(_FULLWIDTH_PARENS)
    joined = _BLANK_RUNS.sub(" ", joined)
    return _SPACE_BESIDE_HAN.sub("", joined)


_FINAL_MARKS = frozenset(";:,.!?…)]}\"'“”‘’；：，。！？、）】")


def add_punctuation(text: str) -> str:
    """Strip the text and end it with "." (or "。" for Chinese) unless it already ends in a mark."""
    text = text.strip()
    if not text or text[-1] in _FINAL_MARKS:
        return text
    return text + ("。" if has_chinese(text) else ".")
