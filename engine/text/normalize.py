"""Numbers, dates and currency in their spoken form ("$5" -> "five dollars"), as upstream OmniVoice 0.2.1
does with `generate(normalize_text=True)`, giving the same text for the same input.

Which package speaks which language (the optional extra `voicedesk[tn]` installs both):
- English and Chinese: WeTextProcessing's grammars (numbers, decimals, dates, times, currency, measures,
  phone numbers; its wheel ships the compiled FSTs, it needs pynini, which has wheels for Linux x86_64
  and aarch64 but not for Windows or macOS arm64);
- every other language: num2words, for bare integers only (about 50 languages; an unknown language or
  a missing num2words leaves the text unchanged, as upstream does).
The model's inline syntax survives: `[laughter]`-style tags and `[B EY1 S]` CMU pronunciations are
never touched, nor in Chinese the pinyin-with-tone overrides (`NI3`), so their digits stay digits.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterator

from engine.errors import Cancelled, TextInputError
from engine.text.clean import has_chinese
from engine.text.normalize_cuts import safe_cuts
from engine.text.normalize_process import POLL_S, normalized_in_child, start_child

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'voicedesk[tn]'"
_BRACKETED = re.compile(r"\[[^\[\]]*\]")  # tags and CMU pronunciations
_PINYIN_WITH_TONE = re.compile(r"[A-Z]+[1-5]")
_DIGITS = re.compile(r"\d+")
FIRST_RUN_CHARS = 100  # the first run reaches the first safe cut after this many characters: enough for a first piece
RUN_GROWTH = 4  # each later run reaches this many times further, or the whole text once past 1/RUN_GROWTH of it
FIRST_RUN_SHARE = 0.5  # the first run stops at its cut when that is within this share of the text, else reads it all:
# all runs together cost at most 1 + FIRST_RUN_SHARE whole-text runs (a short text's first piece waited for it all)
_WETEXT = {"en": "english", "zh": "chinese"}  # languages WeTextProcessing speaks: its grammar's name
Grammar = Callable[[str], str] | str  # a str names a WeTextProcessing grammar, run in the child process


def normalize_available() -> bool:
    """True when the English/Chinese grammars are installed (the `tn` extra)."""
    try:
        import tn  # noqa: F401  (WeTextProcessing)
    except ImportError:
        return False
    return True


def normalize_text(text: str, lang_id: str | None, cancel: threading.Event | None = None) -> str:
    """The text with numbers, dates, currency ... written as words, for `lang_id` (a resolved language
    id; None picks Chinese when the text holds Han characters, else English).

    Raises
    ------
    TextInputError
        For English or Chinese when WeTextProcessing is not installed.
    Cancelled
        As soon as `cancel` is set (the run abandoned, as in `normalized_parts`).
    """
    if not text.strip():
        return text
    lang = _language(text, lang_id)
    return _normalized(text, _grammar_for(lang), pinyin=lang == "zh", first=False, cancel=cancel)


def warm(lang_id: str | None) -> None:
    """Have the grammar of `lang_id` (None: English) loading, in its process, before the first text needs it:
    the child process's start and loading take seconds (docs/latency.md)."""
    language = _WETEXT.get(lang_id or "en")
    if language is not None and normalize_available():
        start_child(language)


def normalized_parts(text: str, lang_id: str | None, cancel: threading.Event | None = None) -> Iterator[str]:
    """`normalize_text(text, lang_id)` in parts, the first soon: their concatenation is exactly its result.

    WeTextProcessing weighs a text's readings along the whole text, in float32: how a number is read can depend
    on how much text comes before it ("Apollo 11" is "eleven" alone, "one one" after twenty words). So no part is
    normalised on its own: run k normalises the text from its start to a safe cut (normalize_cuts) and gives out
    what its output adds to the run before. The first run reaches the first cut FIRST_RUN_CHARS in (the whole text
    if that cut is past FIRST_RUN_SHARE of it), each later one RUN_GROWTH times further than the one before (the
    whole text once past 1/RUN_GROWTH of it); the last reads the whole text. Should a run's output not begin with
    what was given out (a cut that was not safe after all), the rest is normalised from that cut on, as if a tag
    stood there, and a warning is logged. The first run goes ahead of other streams' later runs waiting for the
    grammar's processes (normalize_process). With `cancel`, Cancelled is raised as soon as `cancel` is set, the run
    abandoned (a WeTextProcessing run: its process killed).

    Raises
    ------
    TextInputError
        For English or Chinese when WeTextProcessing is not installed (at the first part).
    Cancelled
        When `cancel` is set before the last part.
    """
    if not text.strip():
        yield text
        return
    lang = _language(text, lang_id)
    normalize, pinyin = _grammar_for(lang), lang == "zh"
    cuts = safe_cuts(text, lang, held_out=_held_out(text, pinyin))
    start, reached, given = 0, 0, ""  # one stretch is normalised from `start`; `given`: its output given out
    while reached < len(text):
        previous = reached
        reached = next((cut for cut in cuts if cut >= max(FIRST_RUN_CHARS, RUN_GROWTH * previous)), len(text))
        if reached > len(text) * (FIRST_RUN_SHARE if previous == 0 else 1 / RUN_GROWTH):
            reached = len(text)  # the whole text now costs little more than the run to `reached`
        spoken = _normalized(text[start:reached], normalize, pinyin=pinyin, first=previous == 0, cancel=cancel)
        if not spoken.startswith(given):
            log.warning("text normalisation: the text before character %d read differently once more followed it: "
                        "the rest is normalised on its own", previous)
            start, given = previous, ""
            spoken = _normalized(text[start:reached], normalize, pinyin=pinyin, first=False, cancel=cancel)
        yield spoken[len(given):]
        given = spoken


def _normalized(text: str, grammar: Grammar, *, pinyin: bool, first: bool, cancel: threading.Event | None) -> str:
    """`outside_markup(text, grammar, pinyin)`: a WeTextProcessing grammar (named) in a child process, which
    keeps the GIL from the app's threads no longer, `first` (a stream's first run) served before later runs waiting
    there; num2words here (pure Python: it lets other threads run)."""
    if isinstance(grammar, str):
        return normalized_in_child(text, language=grammar, pinyin=pinyin, first=first, cancel=cancel)
    return _run(functools.partial(outside_markup, text, grammar, pinyin), cancel)


def _run(normalize: Callable[[], str], cancel: threading.Event | None) -> str:
    """`normalize()`; with `cancel`, on a thread of its own, left to finish unheard once `cancel` is set."""
    if cancel is None:
        return normalize()
    if cancel.is_set():
        raise Cancelled("Stopped.")
    outcome: list = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append(normalize())
        except BaseException as err:  # handed to the caller
            outcome.append(err)
        done.set()

    threading.Thread(target=work, name="normalize", daemon=True).start()
    while not done.wait(POLL_S):
        if cancel.is_set():
            raise Cancelled("Stopped.")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _language(text: str, lang_id: str | None) -> str:
    """`lang_id`, or for None Chinese when the text holds Han characters, else English."""
    return lang_id or ("zh" if has_chinese(text) else "en")


def _grammar_for(lang: str) -> Grammar:
    if lang in _WETEXT:
        if not normalize_available():  # said here: the child process would say it only after starting
            raise _missing_package(_WETEXT[lang])
        return _WETEXT[lang]
    return functools.partial(_integers_in_words, lang=lang)


@functools.cache
def wetext_grammar(language: str) -> Callable[[str], str]:
    """WeTextProcessing's normalizer for "english" or "chinese", built once (loading takes seconds); called in
    the child process (normalize_process)."""
    try:
        _quiet_wetext()
        if language == "chinese":
            from tn.chinese.normalizer import Normalizer
            # only numbers and symbols change: no rewriting of characters, punctuation or interjections
            return Normalizer(remove_interjections=False, remove_erhua=False, traditional_to_simple=False,
                              remove_puncts=False, full_to_half=False).normalize
        from tn.english.normalizer import Normalizer
        return Normalizer().normalize
    except ImportError:
        raise _missing_package(language) from None


def _quiet_wetext() -> None:
    """WeTextProcessing's logger says which grammar files it loads (INFO, on the app's terminal, through a handler of
    its own that its import sets up): only its warnings and errors are said, so a person's terminal keeps one line per
    event of the app's."""
    from tn.processor import logger as wetext_log
    wetext_log.setLevel(logging.WARNING)


def _missing_package(language: str) -> TextInputError:
    return TextInputError(f"Speaking numbers and dates in {language.title()} needs the text normalisation "
                          f"package: {INSTALL_HINT} (or turn 'Speak numbers and dates' off).")


def _integers_in_words(text: str, lang: str) -> str:
    try:
        from num2words import num2words
    except ImportError:
        return text

    def spoken(match: re.Match) -> str:
        try:
            return num2words(int(match.group()), lang=lang)
        except Exception:  # num2words raises several types for a language or number it cannot say
            return match.group()

    return _DIGITS.sub(spoken, text)


def _held_out(text: str, pinyin: bool) -> list[tuple[int, int]]:
    """The protected spans, sorted and merged where they touch."""
    spans = [m.span() for m in _BRACKETED.finditer(text)]
    if pinyin:
        spans += [m.span() for m in _PINYIN_WITH_TONE.finditer(text)]
    return _merged(spans)


def outside_markup(text: str, normalize: Callable[[str], str], pinyin: bool) -> str:
    """Apply `normalize` to the stretches between protected spans (merged when they touch)."""
    pieces, start = [], 0
    for begin, end in _held_out(text, pinyin):
        pieces += [_normalize_piece(text[start:begin], normalize), text[begin:end]]
        start = end
    pieces.append(_normalize_piece(text[start:], normalize))
    return "".join(pieces)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged


def _normalize_piece(piece: str, normalize: Callable[[str], str]) -> str:
    """`normalize` on the piece without its outer whitespace, which is kept (the grammars strip it and
    would glue words to a neighbouring tag); a piece the grammar fails on stays as it was."""
    core = piece.strip()
    if not core:
        return piece
    head, tail = piece[: len(piece) - len(piece.lstrip())], piece[len(piece.rstrip()):]
    try:
        return head + normalize(core) + tail
    except Exception as err:  # a grammar failure must not stop the request: speak the piece as written
        log.warning("text normalisation failed on a piece (%s): kept as written", type(err).__name__)
        return piece
