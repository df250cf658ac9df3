"""Voice design: the `instruct` attributes (gender, age, pitch, style, English accent, Chinese
dialect), checked and written the way the model was trained to read them (upstream
`_resolve_instruct`).

An instruct is a comma-separated list of attributes, at most one per category. The canonical
form is all English ("female, low pitch") joined by ", ", or all Chinese ("女，低音调") joined
by a full-width comma: Chinese when the text to speak has Chinese characters or a dialect is
asked for, English when an accent is asked for.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import TextInputError
from engine.text.clean import has_chinese

CATEGORIES = ("gender", "age", "pitch", "style", "accent", "dialect")


@dataclass(frozen=True)
class Attribute:
    category: str
    label: str  # English, for the UI
    english: str | None  # None: a dialect, which has only a Chinese form
    chinese: str | None  # None: an accent, which has only an English form

    @property
    def value(self) -> str:
        """The form the UI passes on."""
        return self.english or self.chinese


def _both(category: str, pairs: str) -> list[Attribute]:
    """Attributes with an English and a Chinese form, from "english=中文; ..." pairs."""
    items = (pair.split("=") for pair in pairs.split("; "))
    return [Attribute(category, en.capitalize(), en, zh) for en, zh in items]


ATTRIBUTES: tuple[Attribute, ...] = (
    *_both("gender", "male=男; female=女"),
    *_both("age", "child=儿童; teenager=少年; young adult=青年; middle-aged=中年; elderly=老年"),
    *_both(
        "pitch",
        "very low pitch=极低音调; low pitch=低音调; moderate pitch=中音调; high pitch=高音调; "
        "very high pitch=极高音调",
    ),
    *_both("style", "whisper=耳语"),
    *(
        Attribute("accent", f"{origin} accent", f"{origin.lower()} accent", None)
        for origin in (
            "American", "British", "Australian", "Chinese", "Canadian",
            "Indian", "Korean", "Portuguese", "Russian", "Japanese",
        )
    ),
    *(
        Attribute("dialect", f"{place} dialect ({zh})", None, zh)
        for place, zh in (
            ("Henan", "河南话"), ("Shaanxi", "陕西话"), ("Sichuan", "四川话"), ("Guizhou", "贵州话"),
            ("Yunnan", "云南话"), ("Guilin", "桂林话"), ("Jinan", "济南话"), ("Shijiazhuang", "石家庄话"),
            ("Gansu", "甘肃话"), ("Ningxia", "宁夏话"), ("Qingdao", "青岛话"), ("Northeastern", "东北话"),
        )
    ),
)

_TO_CHINESE = {a.english: a.chinese for a in ATTRIBUTES if a.english and a.chinese}
_TO_ENGLISH = {zh: en for en, zh in _TO_CHINESE.items()}
_CATEGORY_OF = {form: a.category for a in ATTRIBUTES for form in (a.english, a.chinese) if form}
_VALID_ENGLISH = sorted(a.english for a in ATTRIBUTES if a.english)
_VALID_CHINESE = sorted(a.chinese for a in ATTRIBUTES if a.chinese)
_ITEM_SEPARATOR = re.compile(r"\s*[,，]\s*")


def choices(category: str) -> list[tuple[str, str]]:
    """(English label, value) pairs of one category, for a dropdown."""
    return [(a.label, a.value) for a in ATTRIBUTES if a.category == category]


def compose_instruct(values: Iterable[str | None]) -> str | None:
    """An instruct from dropdown values (empty ones skipped); pass it to `canonical_instruct`."""
    return ", ".join(v for v in values if v) or None


def _unknown_items_message(unknown: list[str]) -> str:
    """One line (the CLI, the API and the page show it as is): each unknown item with its nearest valid
    one, then the valid items. Upstream says the same over eight lines."""
    named = []
    for item in unknown:
        close = difflib.get_close_matches(item.strip().lower(), _CATEGORY_OF, n=1, cutoff=0.6)
        named.append(f"'{item.strip()}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    return (f"Unknown instruct item{'s' if len(named) > 1 else ''}: {', '.join(named)}. Use English items joined "
            f"by ', ' ({', '.join(_VALID_ENGLISH)}) or Chinese items joined by '，' ({'，'.join(_VALID_CHINESE)}).")


def canonical_instruct(instruct: str | None, use_zh: bool = False) -> str | None:
    """Check an instruct and return its canonical form (None if there is none).

    Parameters
    ----------
    instruct : str or None
        Attributes separated by "," or "，", English in any case, e.g. "Female, Low Pitch".
    use_zh : bool
        Write the result in Chinese; pass ``has_chinese(text)`` for the full text to speak.
        A dialect forces Chinese and an accent forces English.

    Raises
    ------
    TextInputError
        For an unknown attribute (the message lists the valid ones), for a dialect together with
        an accent, and for two attributes of one category.
    """
    if instruct is not None and not isinstance(instruct, str):
        raise TextInputError(f"The instruct must be a string, not {type(instruct).__name__}.")
    if instruct is None or not instruct.strip():
        return None
    instruct = instruct.strip()
    raw_items = [raw for raw in _ITEM_SEPARATOR.split(instruct) if raw]
    items = [raw.strip().lower() for raw in raw_items]
    unknown = [raw for raw, item in zip(raw_items, items) if item not in _CATEGORY_OF]
    if unknown:
        raise TextInputError(_unknown_items_message(unknown))

    categories = {_CATEGORY_OF[item] for item in items}
    if {"dialect", "accent"} <= categories:
        raise TextInputError(
            "Cannot mix Chinese dialect and English accent in a single instruct. "
            "Dialects are for Chinese speech, accents for English speech."
        )
    if "dialect" in categories or "accent" in categories:
        use_zh = "dialect" in categories
    if use_zh:
        items = [_TO_CHINESE.get(item, item) for item in items]
    else:
        items = [_TO_ENGLISH.get(item, item) for item in items]

    clashes = [
        [item for item in items if _CATEGORY_OF[item] == category] for category in CATEGORIES
    ]
    clashes = [group for group in clashes if len(group) > 1]
    if clashes:
        raise TextInputError(
            "Conflicting instruct items within the same category: "
            + "; ".join(" vs ".join(f"'{item}'" for item in group) for group in clashes)
            + ". Each category (gender, age, pitch, style, accent, dialect) allows at most one item."
        )
    return ("，" if any(has_chinese(item) for item in items) else ", ").join(items)
