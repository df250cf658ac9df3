"""The 646 languages OmniVoice knows, by id (mostly ISO 639) and by English name.

The table is data, `engine/text/data/languages.json` (id -> display name), exported from upstream by
`tests/goldens/export_languages.py`.
"""
from __future__ import annotations

import json
import warnings
from functools import lru_cache
from pathlib import Path

from engine.errors import TextInputError

_TABLE = Path(__file__).parent / "data" / "languages.json"

AUTO = "auto"  # the dropdown value for "let the model work it out"
_NO_LANGUAGE = frozenset({"none", AUTO})


class UnknownLanguageWarning(UserWarning):
    """A language that is neither a known id nor a known name; synthesis goes on without one."""


class UnknownLanguageError(TextInputError):
    """The same, where the caller asked to refuse it (`resolve_language(..., strict=True)`)."""


@lru_cache(maxsize=1)
def _names_by_id() -> dict[str, str]:
    return json.loads(_TABLE.read_text("utf-8"))


@lru_cache(maxsize=1)
def _ids_by_lower_name() -> dict[str, str]:
    return {name.lower(): lang_id for lang_id, name in _names_by_id().items()}


def resolve_language(language: str | None, *, strict: bool = False) -> str | None:
    """The language id for an id or an English name, or None for "no language hint".

    As upstream: ids are matched exactly ("en", not "EN"), names in any case ("english"). None,
    "None" and "auto" mean no hint. Anything else warns (`UnknownLanguageWarning`) and gives None,
    which the model handles as language-agnostic; with `strict` it is refused instead (what the CLI,
    the API and Studio scripts do with a language a person typed).

    Raises
    ------
    TextInputError
        If `language` is neither None nor a string.
    UnknownLanguageError
        With `strict`, if `language` is not known.
    """
    if language is None:
        return None
    if not isinstance(language, str):
        raise TextInputError(f"The language must be a name or an id, not {type(language).__name__}.")
    if language.lower() in _NO_LANGUAGE:
        return None
    if language in _names_by_id():
        return language
    lang_id = _ids_by_lower_name().get(language.lower())
    if lang_id is None:
        advice = "use an id such as 'en', 'zh', 'ja' or a name such as 'English'"
        if strict:
            raise UnknownLanguageError(f"Unknown language {language!r}: {advice}.")
        warnings.warn(f"Language {language!r} is not recognised; {advice}. Going on without a language hint.",
                      UnknownLanguageWarning, stacklevel=2)
    return lang_id


def language_name(lang_id: str | None) -> str:
    """Display name of a language id ("Auto" for None)."""
    return "Auto" if lang_id is None else _names_by_id()[lang_id]


def language_ids() -> frozenset[str]:
    """Every supported language id."""
    return frozenset(_names_by_id())


def language_choices() -> list[tuple[str, str]]:
    """(label, value) pairs for a dropdown: ("Auto", "auto") first, then every language by name."""
    by_name = sorted(_names_by_id().items(), key=lambda item: item[1].casefold())
    return [("Auto", AUTO)] + [(name, lang_id) for lang_id, name in by_name]
