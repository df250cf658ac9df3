"""The Studio's script format, written: `format_script` gives text that `parse_script` reads back to the
same script, escaping whatever would otherwise read as markup."""
from __future__ import annotations

import re

from .parse import COLON_NAME, PAUSE, capitalised
from .script import Item, Line, Pause, Script

_NEEDS_LITERAL = re.compile(r"^(?:#|\[|\\|<!--|>|[-*+]\s|\d{1,3}[.)]\s|([-*_])(?:\s*\1){2,}$)")


def format_script(script: Script) -> str:
    """The script as text; `parse_script` reads it back to the same script (line numbers aside)."""
    out: list[str] = [f"[voice {name} = {instruct}]" for name, instruct in script.designed.items()]
    for chapter in script.chapters:
        if chapter.title is not None:
            if out:
                out.append("")
            out.append(f"{'#' * chapter.level} {escape_text(chapter.title)}")
        for item in chapter.items:
            if isinstance(item, Line) and item.paragraph and out and out[-1] != "":
                out.append("")
            out.append(_format_item(item))
    return "\n".join(out) + "\n"


def _format_item(item: Item) -> str:
    if isinstance(item, Pause):
        return f"[pause {item.seconds * 1000:g}ms]"
    text = escape_text(item.text)
    if item.voice is None:
        # an escaped first character already keeps the line from reading as markup
        needs_literal = not text.startswith("\\") and (_NEEDS_LITERAL.match(text) or _looks_named(text))
        prefix = "\\" if needs_literal else ""
    elif COLON_NAME.fullmatch(f"{item.voice}: x") and all(capitalised(w) for w in item.voice.split()):
        prefix = f"{item.voice}: "
    else:
        prefix = "[" + re.sub(r"([\\\[\]])", r"\\\1", item.voice) + "] "
    options = ", ".join(f"{name} {_format_value(value)}" for name, value in item.options.items())
    return prefix + text + (f" {{{options}}}" if options else "")


def _looks_named(text: str) -> bool:
    colon = COLON_NAME.match(text)
    return bool(colon) and all(capitalised(word) for word in colon.group(1).split())


def _format_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def escape_text(text: str) -> str:
    """Text with every character the parser would read as markup escaped (tags and phones stay)."""
    text = re.sub(r"([\\{}*_`<])", r"\\\1", text)
    text = PAUSE.sub(lambda m: "\\" + m.group(), text)
    return re.sub(r"\[([^\]]*)\]\(", r"\\[\1\\](", text)  # a link
