"""The Studio's script format, read: plain text or Markdown that a person can type.

    # Chapter one                         a `#` or `##` heading starts a chapter (it is not spoken)
    It was a dark night.                  a line without a name is read by the narrator
    Anna: Who is there?                   a line spoken by the saved voice "Anna"
    [Old Tom] Only me. [laughter]         the same, for any name; OmniVoice's tags pass through
    [pause 500ms]   [pause 2s]            silence, on a line of its own or inside a line
    Anna: Quiet now. {speed 0.9, instruct "whisper"}      per-line options, at the end of a line
    [voice Bob = male, low pitch]         a designed voice, usable as `Bob:` anywhere in the script
    \\Note: not a speaker                  a backslash first: the line is read as it is
    <!-- a comment -->                    ignored, as in Markdown

Markdown emphasis, code marks, list bullets, quote marks and link targets are not spoken. A
backslash before one of ``\\ { } [ * _ ` #`` makes it literal. Every problem is reported with its
line number (`ScriptError`) before anything is rendered; `format_script` writes a script back as
text that parses to the same script.
"""
from __future__ import annotations

import re
from dataclasses import replace

from engine.config import GenerationConfig
from engine.errors import SettingError, TextInputError
from engine.text.clean import has_chinese
from engine.text.instruct import canonical_instruct
from engine.text.languages import UnknownLanguageError, resolve_language
from engine.text.tokens import NONVERBAL_TAGS

from .script import (
    MAX_LINES,
    MAX_PAUSE_S,
    OPTION_NAMES,
    Chapter,
    Item,
    Line,
    Options,
    Pause,
    Problem,
    Script,
    ScriptError,
)

_ESCAPABLE = "\\{}[]*_`#:<"
_PLACEHOLDER = 0xE000  # a private-use code point per escaped character while a line is parsed
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
_HEADING = re.compile(r"^(#{1,6})(?:\s+(.*?)(?:\s+#+)?)?\s*$")
_RULE = re.compile(r"^([-*_])(?:\s*\1){2,}$")
_LIST_MARK = re.compile(r"^(?:[-*+]|\d{1,3}[.)]|#{3,6})\s+")  # a small heading is read as a line
_QUOTE_MARK = re.compile(r"^(?:>\s?)+")
_VOICE_DEF = re.compile(r"^\[\s*voice\s+([^=\]]+?)\s*=\s*([^\]]*)\]$", re.IGNORECASE)
_BRACKET_NAME = re.compile(r"^\[([^\[\]]+)\]\s*(.*)$")
_OPEN_VOICE_DEF = re.compile(r"^\[\s*voice\s+[^=\]]+=", re.IGNORECASE)  # a definition without its ]
_OPEN_PAUSE = re.compile(r"\[\s*pause\b[^\]]*$", re.IGNORECASE)  # a [pause without its ]
# A name before a colon: up to four capitalised words (caseless scripts such as Chinese count as capitalised).
_NAME_WORD = r"[^\W\d_][\w'’.-]*"
COLON_NAME = re.compile(rf"^({_NAME_WORD}(?: {_NAME_WORD}){{0,3}})\s*[:：]\s*(.*)$")
_OPTIONS = re.compile(r"\{([^{}]*)\}\s*$")
PAUSE = re.compile(r"\[\s*pause\b([^\]]*)\]", re.IGNORECASE)
_PAUSE_VALUE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$", re.IGNORECASE)
_TAG = re.compile(r"^(?:" + "|".join(map(re.escape, NONVERBAL_TAGS)) + r")$")
# CMU (ARPAbet) phones with optional stress digits, as OmniVoice reads them: "[B EY1 S]"
_ARPABET = ("AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH"
            .split())
_PHONES = re.compile(r"^(?:" + "|".join(_ARPABET) + r")[012]?(?: (?:" + "|".join(_ARPABET) + r")[012]?)*$")
_OPTION_ITEM = re.compile(r"""^\s*([A-Za-z]+)\s*(?:[:=]\s*|\s+)("(?:[^"\\]|\\.)*"|'[^']*'|[^"',]+?)\s*$""")
# Markdown inline marks that are not spoken.
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])")
_CODE = re.compile(r"`+([^`]*)`+")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_SPACES = re.compile(r"\s+")
_COMMENT_START = re.compile(r"(?<!\\)<!--")


class _Escapes:
    """Swaps `\\x` for a private-use character so that no pattern sees it, and back."""

    def __init__(self):
        self.chars: list[str] = []

    def hide(self, text: str) -> str:
        def swap(match: re.Match) -> str:
            self.chars.append(match.group(1))
            return chr(_PLACEHOLDER + len(self.chars) - 1)

        return re.sub(r"\\([" + re.escape(_ESCAPABLE) + "])", swap, text)

    def restore(self, text: str) -> str:
        return _PRIVATE_USE.sub(lambda m: self.chars[ord(m.group()) - _PLACEHOLDER], text)


def parse_script(text: str) -> Script:
    """Parse a script; raises ScriptError listing every problem with its line number."""
    if not isinstance(text, str):
        raise ScriptError([Problem(0, f"A script is text, not {type(text).__name__}.")])
    parser = _Parser()
    for number, raw in enumerate(text.splitlines(), 1):
        parser.feed(number, raw)
    return parser.finish()


class _Parser:
    def __init__(self):
        self.problems: list[Problem] = []
        self.chapters: list[Chapter] = []
        self.title: str | None = None
        self.level, self.heading_line = 1, 0
        self.items: list[Item] = []
        self.designed: dict[str, str] = {}
        self.designed_at: dict[str, int] = {}
        self.in_comment = False
        self.paragraph = True
        self.count = 0

    def error(self, number: int, message: str) -> None:
        self.problems.append(Problem(number, message))

    def feed(self, number: int, raw: str) -> None:
        line = self._strip_comments(_PRIVATE_USE.sub("", raw)).strip()
        if not line:
            self.paragraph = self.paragraph or not raw.strip()  # a comment is no paragraph break
            return
        literal = line.startswith("\\") and not (len(line) > 1 and line[1] in _ESCAPABLE)
        if literal:
            line = line[1:].lstrip()
        escapes = _Escapes()
        line = escapes.hide(line)
        if not literal and self._structure(number, line, escapes):
            return
        voice, body = (None, line) if literal else self._speaker(line, escapes)
        self._body(number, voice, body, escapes)

    def _strip_comments(self, line: str) -> str:
        out = []
        while line:
            if self.in_comment:
                end = line.find("-->")
                if end < 0:
                    return "".join(out)
                line, self.in_comment = line[end + 3:], False
            else:
                opening = _COMMENT_START.search(line)
                if opening is None:
                    out.append(line)
                    break
                out.append(line[:opening.start()])
                line, self.in_comment = line[opening.end():], True
        return "".join(out)

    def _structure(self, number: int, line: str, escapes: _Escapes) -> bool:
        """Headings, rules and voice definitions; True when the line was one of them."""
        heading = _HEADING.match(line)
        if heading and len(heading.group(1)) <= 2:
            title = _speakable(heading.group(2) or "", escapes)
            if not title:
                self.error(number, "a heading needs a title, e.g. '# Chapter one'")
                return True
            self._close_chapter()
            self.title, self.level, self.heading_line = title, len(heading.group(1)), number
            self.paragraph = True
            return True
        if _RULE.match(line):
            self.paragraph = True
            return True
        definition = _VOICE_DEF.match(line)
        if definition:
            self._define(number, escapes.restore(definition.group(1)).strip(),
                         escapes.restore(definition.group(2)).strip())
            return True
        if _OPEN_VOICE_DEF.match(line):
            self.error(number, f"'{escapes.restore(line)}' is not closed: end a voice definition with ], "
                               "e.g. [voice Bob = male, low pitch]")
            return True
        return False

    def _define(self, number: int, name: str, instruct: str) -> None:
        if not instruct:
            self.error(number, f"the designed voice '{name}' needs a description, "
                               f"e.g. [voice {name} = female, low pitch]")
            return
        try:
            instruct = canonical_instruct(instruct)
        except TextInputError as err:
            self.error(number, f"voice '{name}': {_first_line(err)}")
            return
        previous = self.designed_at.get(name.casefold())
        if previous is not None:
            self.error(number, f"the voice '{name}' is already defined on line {previous}")
            return
        self.designed[name], self.designed_at[name.casefold()] = instruct, number

    @staticmethod
    def _speaker(line: str, escapes: _Escapes) -> tuple[str | None, str]:
        line = _QUOTE_MARK.sub("", _LIST_MARK.sub("", line, count=1), count=1)
        bracket = _BRACKET_NAME.match(line)
        if bracket:
            name = bracket.group(1).strip()
            if not (_TAG.match(name) or _PHONES.match(name) or PAUSE.fullmatch(f"[{name}]")):
                return escapes.restore(name), bracket.group(2)
        colon = COLON_NAME.match(line)
        if colon and all(capitalised(word) for word in colon.group(1).split()):
            return escapes.restore(colon.group(1)), colon.group(2)
        return None, line

    def _body(self, number: int, voice: str | None, body: str, escapes: _Escapes) -> None:
        options = Options()
        found = _OPTIONS.search(body)
        if found:
            options = self._options(number, escapes.restore(found.group(1)))
            body = body[:found.start()]
        if "{" in body or "}" in body:
            self.error(number, "options go in one {…} at the end of the line, e.g. {speed 0.9}")
            return
        unclosed = _OPEN_PAUSE.search(body)
        if unclosed:
            self.error(number, f"'{escapes.restore(unclosed.group()).strip()}' is not closed: write [pause 500ms] or "
                               f"[pause 2s]")
            return
        pieces: list[Item] = []
        position = 0
        for pause in PAUSE.finditer(body):
            pieces += self._text(number, voice, body[position:pause.start()], options, escapes)
            seconds = _pause_seconds(pause.group(1))
            if seconds is None:
                self.error(number, f"'{escapes.restore(pause.group())}' is not a pause: write [pause 500ms] or "
                                   f"[pause 2s] (at most {MAX_PAUSE_S:.0f} s)")
                return
            pieces.append(Pause(number, seconds))
            position = pause.end()
        pieces += self._text(number, voice, body[position:], options, escapes)
        spoken = [p for p in pieces if isinstance(p, Line)]
        if voice is not None and not spoken:
            self.error(number, f"'{voice}' has nothing to say on this line")
            return
        if found and not spoken:
            self.error(number, "options need a spoken line; a pause takes none")
            return
        if spoken:
            spoken_first = pieces.index(spoken[0])
            pieces[spoken_first] = replace(spoken[0], paragraph=self.paragraph)
            self.paragraph = False
        self.count += len(spoken)
        self.items += pieces

    def _text(self, number: int, voice: str | None, text: str, options: Options,
              escapes: _Escapes) -> list[Line]:
        text = _speakable(text, escapes)
        return [Line(number, text, voice, options)] if text else []

    def _options(self, number: int, raw: str) -> Options:
        values: dict[str, object] = {}
        for item in _split_options(raw):
            match = _OPTION_ITEM.match(item)
            if not match:
                self.error(number, f"cannot read the option '{item.strip()}': write it as name value, "
                                   f"e.g. {{speed 0.9, instruct \"whisper\"}}")
                continue
            name, value = match.group(1).lower(), _unquote(match.group(2))
            if name not in OPTION_NAMES:
                self.error(number, f"unknown option '{name}' (known: {', '.join(OPTION_NAMES)})")
            elif name in values:
                self.error(number, f"the option '{name}' is given twice")
            else:
                try:
                    values[name] = _option_value(name, value)
                except ValueError as err:
                    self.error(number, str(err))
        return Options(**values)

    def _close_chapter(self) -> None:
        if self.title is not None or self.items:
            self.chapters.append(Chapter(self.title, self.level, self.heading_line, tuple(self.items)))
        self.items = []

    def finish(self) -> Script:
        self._close_chapter()
        if self.in_comment:
            self.error(0, "a comment <!-- is never closed with -->")
        if self.count == 0 and not self.problems:
            self.error(0, "The script is empty: type or import some text first.")
        if self.count > MAX_LINES:
            self.error(0, f"The script has {self.count:,} spoken lines; the Studio takes at most {MAX_LINES:,} "
                          "per project (split the book into several projects).")
        for chapter in self.chapters:
            for line in chapter.lines:
                self._check_instruct(line)
        if self.problems:
            raise ScriptError(self.problems)
        return Script(tuple(self.chapters), dict(self.designed))

    def _check_instruct(self, line: Line) -> None:
        if line.options.instruct is None:
            return
        try:
            canonical_instruct(line.options.instruct, use_zh=has_chinese(line.text))
        except TextInputError as err:
            self.error(line.number, _first_line(err))


def _speakable(text: str, escapes: _Escapes) -> str:
    """The words of `text` without Markdown's marks, escapes undone, spaces collapsed."""
    text = _IMAGE.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _CODE.sub(r"\1", text)
    text = _STRONG.sub(r"\2", text)
    text = _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), text)
    text = _HTML_TAG.sub("", text)
    return _SPACES.sub(" ", escapes.restore(text)).strip()


def capitalised(word: str) -> bool:
    first = word[0]
    return first.isupper() or not first.islower()  # caseless scripts count


def _split_options(raw: str) -> list[str]:
    """Split at commas outside quotes."""
    items, current, quote = [], [], None
    for ch in raw:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    items.append("".join(current))
    return [item for item in items if item.strip()]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return re.sub(r'\\(.)', r"\1", value[1:-1]) if value[0] == '"' else value[1:-1]
    return value


def _option_value(name: str, value: str) -> object:
    if name == "instruct":
        if not value.strip():
            raise ValueError("the instruct option needs a description, e.g. instruct \"whisper\"")
        return value.strip()
    if name == "language":
        try:
            lang = resolve_language(value, strict=True)
        except UnknownLanguageError as err:
            raise ValueError(str(err)) from None
        if lang is None:
            raise ValueError("language auto is the default: leave the option out")
        return lang
    number = _number(value.removesuffix("s").strip() if name == "duration" else value)
    if number is None:
        raise ValueError(f"the {name} must be a number, not '{value}'")
    if name == "seed" and number.is_integer():
        number = int(number)
    try:
        GenerationConfig(**{name: number}).check()  # the engine's own ranges
    except SettingError as err:
        raise ValueError(str(err).rstrip(".")) from None
    return number


def _number(value: str) -> float | None:
    return float(value) if re.fullmatch(r"-?(?:\d+(?:\.\d+)?|\.\d+)", value.strip()) else None


def _pause_seconds(raw: str) -> float | None:
    match = _PAUSE_VALUE.match(raw)
    if not match:
        return None
    seconds = float(match.group(1)) / (1000.0 if match.group(2).lower() == "ms" else 1.0)
    return seconds if seconds <= MAX_PAUSE_S else None


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0]
