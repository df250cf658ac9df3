"""Long text into chunks: upstream's `chunk_text` (reproduced from OmniVoice 0.2.1 exactly) and our
sentence splitter for streaming (`stream_chunks`), which never drops or reorders a visible character.
"""
from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator

from engine.text.clean import require_text
from engine.text.duration import FRAME_RATE, char_weight, text_weight, weight_per_second

# ---------------------------------------------------------------------------------------------
# Upstream's long-text chunks

_SPLIT_MARKS = frozenset(".,;:!?。，；：！？")
_CLOSING_MARKS = frozenset("\"'“”‘’）]》>」】")
ABBREVIATIONS = frozenset(
    """Mr. Mrs. Ms. Dr. Prof. Sr. Jr. Rev. Fr. Hon. Pres. Gov. Capt. Gen. Sen. Rep. Col. Maj. Lt.
    Cmdr. Sgt. Cpl. Co. Corp. Inc. Ltd. Est. Dept. St. Ave. Blvd. Rd. Mt. Ft. No. Jan. Feb. Mar.
    Apr. Aug. Sep. Sept. Oct. Nov. Dec. i.e. e.g. vs. Vs. Etc. approx. fig. def.""".split()
)
_LONGEST_ABBREVIATION = max(map(len, ABBREVIATIONS))


def _ends_with_abbreviation(text: str, start: int, end: int) -> bool:
    """Is the last whitespace-separated word of text[start:end] an abbreviation?"""
    # A word longer than the window is longer than any abbreviation, so the window suffices.
    window = text[max(start, end - _LONGEST_ABBREVIATION - 1) : end]
    words = window.split()
    return bool(words) and words[-1] in ABBREVIATIONS


def _upstream_sentence_ends(text: str) -> list[int]:
    """End offsets of upstream's sentences, which tile the text.

    Any split mark ends a sentence, except a "." closing an abbreviation; split or closing marks
    met right after a sentence ended are glued onto that sentence.
    """
    ends: list[int] = []
    start = 0
    for i, ch in enumerate(text):
        if i == start and ends and (ch in _SPLIT_MARKS or ch in _CLOSING_MARKS):
            ends[-1] = start = i + 1
        elif ch in _SPLIT_MARKS and not (ch == "." and _ends_with_abbreviation(text, start, i + 1)):
            ends.append(i + 1)
            start = i + 1
    if start < len(text):
        ends.append(len(text))
    return ends


def chunk_text(text: str, max_chars: int, min_chars: int | None = 3) -> list[str]:
    """Split long text at punctuation into chunks of at most `max_chars` characters, as upstream.

    Sentences are packed greedily (one longer than `max_chars` stays whole). Then a chunk shorter
    than `min_chars` joins the one before it, and a short first chunk takes in the second.
    Chunks are stripped; empty ones are dropped.
    """
    spans: list[tuple[int, int]] = []
    chunk_start = sentence_start = 0
    for end in _upstream_sentence_ends(text):
        if end - chunk_start > max_chars:
            if sentence_start > chunk_start:
                spans.append((chunk_start, sentence_start))
            chunk_start = sentence_start
        sentence_start = end
    if sentence_start > chunk_start:
        spans.append((chunk_start, sentence_start))

    if min_chars is not None and spans:
        first_is_short = spans[0][1] - spans[0][0] < min_chars
        merged = [spans[0]]
        for i, (start, end) in enumerate(spans[1:], start=1):
            if (i == 1 and first_is_short) or end - start < min_chars:
                merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        spans = merged
    return [chunk for start, end in spans if (chunk := text[start:end].strip())]


def chunk_text_for_duration(text: str, target_tokens: int, chunk_seconds: float = 15.0) -> list[str]:
    """Upstream's long-text split: chunks of about `chunk_seconds` of speech, judged by the
    text's frames per character (`target_tokens` is the frame estimate for the whole text).

    Upstream keeps a sentence longer than that whole, so text without full stops became one item of
    any length (10,000 characters: 700 s of audio, 8 GB). Here a chunk of more than twice
    `chunk_seconds` at a typical speaking rate (upstream's 30 s threshold for chunking at all) is cut
    by the streaming rule instead: at clauses, then between words, into pieces of `chunk_seconds`."""
    tokens_per_char = target_tokens / len(text)
    chunks = chunk_text(text, int(chunk_seconds * FRAME_RATE / tokens_per_char), min_chars=3)
    max_weight = chunk_seconds * weight_per_second()
    return [piece for chunk in chunks
            for piece in (_split(chunk, max_weight, max_weight / 4) if text_weight(chunk) > 2 * max_weight
                          else [chunk])]


# ---------------------------------------------------------------------------------------------
# Our splitter for streaming

WORD_GAP, CLAUSE, SENTENCE, PARAGRAPH = 0, 1, 2, 3  # how good a place to cut is

SPACED_FINAL_MARKS = ".!?…‼⁇⁈⁉"  # end a sentence when whitespace (or the text's end) follows them
UNSPACED_FINAL_MARKS = "。！？．｡।॥؟۔։።"  # end one at once (scripts written without spaces, and others')
FINAL_MARKS = SPACED_FINAL_MARKS + UNSPACED_FINAL_MARKS
CLOSERS = "\"'”’»)]}）」』】〉》"  # closing quotes and brackets: they stay with the mark before them
_CLOSING = re.escape(CLOSERS)
_BOUNDARY = re.compile(
    rf"(?P<sentence>[{re.escape(SPACED_FINAL_MARKS)}]+[{_CLOSING}]*(?=\s|$)"
    rf"|[{UNSPACED_FINAL_MARKS}]+[.!?…。！？{_CLOSING}]*)"
    rf"|(?P<clause>[,;:]+[{_CLOSING}]*(?=\s|$)|[，、；：،؛]+[{_CLOSING}]*)"
    r"|(?P<space>\s+)"
)
_GLUING = frozenset("\u200c\u200d")  # zero-width (non-)joiners bind their neighbours


def cut_points(text: str) -> tuple[list[int], list[int]]:
    """Offsets where a chunk may end, ascending, and how good each one is."""
    cuts = _CutPoints()
    cuts.scan(text, complete=True)
    return cuts.offsets, cuts.kinds


class _CutPoints:
    """The cut points of a text that may still grow at its end (`scan` after each addition). A boundary read to
    the text's end may change with more text (a mark then a letter is no sentence end; a longer run of
    whitespace may hold a blank line): it is read again by the next scan, and nothing from `settled` on is sure.
    Each scan reads on from `settled`, so a text given in many parts is read about once in all (reading again from
    the last boundary instead made a text with none, such as Chinese without punctuation, quadratic: 8 s for
    50,000 characters in parts of 10)."""

    def __init__(self):
        self.offsets: list[int] = []
        self.kinds: list[int] = []
        self.settled = 0  # no boundary that more text could change or add begins before this offset
        self._kept = 0  # entries that more text cannot change
        self._kept_kind = WORD_GAP  # the last kept entry's kind, before a boundary still open at its offset raised it

    def scan(self, text: str, complete: bool) -> None:
        del self.offsets[self._kept:], self.kinds[self._kept:]
        if self._kept:
            self.kinds[-1] = self._kept_kind
        resume, self.settled = self.settled, len(text)
        # a match is read up to the character after it (what stops it, or its lookahead), so one that ends before
        # the text does is what any longer text gives too; a failed attempt never reaches the end, so every place
        # before the first match read to the end (or the end) that began no match begins none in a longer text
        for m in _BOUNDARY.finditer(text, resume):
            self._add(text, m)
            if complete or m.end() < len(text):
                self._kept = len(self.offsets)
                self._kept_kind = self.kinds[-1] if self.kinds else WORD_GAP
            else:
                self.settled = m.start()

    def _add(self, text: str, m: re.Match) -> None:
        if m.lastgroup == "space":
            newlines = m.group().count("\n")
            kind = PARAGRAPH if newlines > 1 else SENTENCE if newlines else WORD_GAP
            offset = m.start()
        else:
            if m.group() == "." and last_word(text, m.end()) in ABBREVIATIONS:
                return
            kind = SENTENCE if m.lastgroup == "sentence" else CLAUSE
            offset = m.end()
        if self.offsets and self.offsets[-1] == offset:
            self.kinds[-1] = max(self.kinds[-1], kind)  # a mark and the whitespace after it
        else:
            self.offsets.append(offset)
            self.kinds.append(kind)


def last_word(text: str, end: int) -> str:
    """The word text[:end] ends with: its letters (with their combining marks), digits, dots and apostrophes back
    to anything else (a space, a quote or bracket, a dash, an ellipsis: "e.g." of "fruit (e.g."), without leading
    quotes."""
    start = end
    while start and (text[start - 1].isalnum() or text[start - 1] in ".'’"
                     or unicodedata.category(text[start - 1])[0] == "M"):
        start -= 1
    return text[start:end].lstrip("'’")


def _safe_hard_cut(text: str, start: int, cut: int) -> int:
    """Move a cut made in the middle of a word back so it does not split a letter from its
    combining marks or an emoji sequence."""
    while start + 1 < cut < len(text) and (
        unicodedata.category(text[cut])[0] == "M" or text[cut] in _GLUING or text[cut - 1] in _GLUING
    ):
        cut -= 1
    return cut


class _Splitter:
    """Chooses chunk ends over cut points and prefix weights of a text that may still grow at its end (`extend`)."""

    def __init__(self, min_weight: float):
        self.text = ""
        self.complete = False
        self.min_weight = min_weight
        self.prefix = [0.0]
        self.cuts = _CutPoints()

    @classmethod
    def of(cls, text: str, min_weight: float) -> _Splitter:
        splitter = cls(min_weight)
        splitter.extend(text, complete=True)
        return splitter

    def extend(self, more: str, complete: bool) -> None:
        self.text += more
        self.prefix += itertools.islice(itertools.accumulate(map(char_weight, more), initial=self.prefix[-1]), 1, None)
        self.complete = complete
        self.cuts.scan(self.text, complete)

    def weight(self, start: int, end: int) -> float:
        return self.prefix[end] - self.prefix[start]

    def next_end(self, start: int, max_weight: float, first: bool) -> int | None:
        """End of the chunk starting at `start`: at most `max_weight` heavy where possible. None while more text
        could change it (the window, or a hard cut one character past it, reaches what is not settled)."""
        text, offsets, kinds = self.text, self.cuts.offsets, self.cuts.kinds
        limit = bisect.bisect_right(self.prefix, self.prefix[start] + max_weight) - 1
        if not self.complete and limit + 1 >= self.cuts.settled:
            return None
        lo = bisect.bisect_right(offsets, start)
        hi = bisect.bisect_right(offsets, limit)
        window = range(lo, hi)
        paragraph = next((i for i in window if kinds[i] == PARAGRAPH), None)
        if paragraph is not None:
            return offsets[paragraph]
        if limit >= len(text):
            return len(text)
        long_enough = [i for i in window if self.weight(start, offsets[i]) >= self.min_weight]
        if first:
            # The shortest clause gets audio out soonest; failing one, as many words as fit.
            clause = next((i for i in long_enough if kinds[i] >= CLAUSE), None)
            if clause is not None:
                return offsets[clause]
        candidates = long_enough or list(window)
        if candidates:
            best = max(candidates, key=lambda i: (kinds[i], i))
            return offsets[best]
        return _safe_hard_cut(text, start, max(limit, start + 1))


def stream_chunks(
    text: str,
    first_max_seconds: float = 3.0,
    max_seconds: float = 12.0,
    min_seconds: float = 1.0,
) -> list[str]:
    """Split text into chunks for streaming synthesis: a short first one, then whole sentences.

    The first chunk ends at the first clause or sentence mark (comma, colon, semicolon, full stop,
    and their CJK forms) that gives at least `min_seconds` and at most `first_max_seconds` of
    speech, else after as many words as fit, so the first audio comes quickly. Later chunks pack
    whole sentences up to `max_seconds`, else clauses, else words, else characters (text without
    spaces). A blank line always ends a chunk; a last chunk under `min_seconds` joins the previous
    one. Seconds are judged with a typical speaking rate (`duration.weight_per_second`).

    Chunks are consecutive pieces of `text` with the surrounding whitespace stripped: joining
    them gives back every non-whitespace character, in order.

    Raises
    ------
    TextInputError
        If the text is not a string or holds nothing but whitespace.
    """
    return [chunk for chunk, _ in stream_pieces([require_text(text)], first_max_seconds, max_seconds, min_seconds)]


def stream_pieces(
    parts: Iterable[str],
    first_max_seconds: float = 3.0,
    max_seconds: float = 12.0,
    min_seconds: float = 1.0,
) -> Iterator[tuple[str, bool]]:
    """`stream_chunks` of a text that arrives in parts (as normalisation makes it, `normalize.normalized_parts`):
    each chunk with whether it is the last, given as soon as no later part can change it, having read only as
    many parts as that needs. The chunks are those of `stream_chunks("".join(parts))`.

    Raises
    ------
    TextInputError
        If the whole text holds nothing but whitespace (once it is all read).
    """
    rate = weight_per_second()
    return _chunks(parts, max_seconds * rate, min_seconds * rate, first_max_weight=first_max_seconds * rate)


def first_cut(text: str, max_weight: float, min_weight: float) -> int:
    """Where the first chunk of `text` ends under the one cutting rule of `_chunks` (no short first chunk):
    for text still arriving that has waited too long without a sentence end (engine/text/clauses.py)."""
    return _Splitter.of(text, min_weight).next_end(0, max_weight, first=False)


def _split(text: str, max_weight: float, min_weight: float) -> list[str]:
    return [chunk for chunk, _ in _chunks([text], max_weight, min_weight)]


def _chunks(parts: Iterable[str], max_weight: float, min_weight: float,
            first_max_weight: float | None = None) -> Iterator[tuple[str, bool]]:
    """The one cutting rule: chunks of at most `max_weight`, cut at a blank line, else the best of
    sentence end, clause mark, word gap, character (in that order) that leaves at least
    `min_weight`; a short last chunk joins the one before. With `first_max_weight`, the first chunk
    is short and ends at the earliest clause that fits. The text arrives in `parts`: a chunk is given
    once its end is settled and at least `min_weight` of text follows it, so that a short last chunk
    cannot join it. It is not the last: a settled end lies before the text's last boundary (a trailing
    run of whitespace is one, still open), so something other than whitespace follows it."""
    splitter = _Splitter(min_weight)
    parts = iter(parts)

    def read_more() -> None:
        part = next(parts, None)
        splitter.extend(part or "", complete=part is None)

    while not splitter.complete and not splitter.text.strip():
        read_more()
    start = len(splitter.text) - len(splitter.text.lstrip())  # leading whitespace joins the first chunk
    ends: list[int] = []  # settled ends of the chunks not given yet
    given, decided, gave_any = 0, 0, False  # where the next chunk to give starts; how many ends were settled
    while True:
        while start < len(splitter.text):
            first = first_max_weight is not None and not decided
            end = splitter.next_end(start, first_max_weight if first else max_weight, first=first)
            if end is None:
                break
            ends.append(end)
            start, decided = end, decided + 1
        if splitter.complete:
            break
        text = splitter.text
        while ends and splitter.weight(ends[0], len(text)) >= min_weight:
            if chunk := text[given:ends[0]].strip():
                gave_any = True
                yield chunk, False
            given = ends.pop(0)
        read_more()
    text = splitter.text
    if len(ends) > 1 and splitter.weight(ends[-2], ends[-1]) < min_weight:
        del ends[-2]
    chunks = [chunk for begin, end in zip([given, *ends], ends) if (chunk := text[begin:end].strip())]
    if not gave_any and not chunks:
        require_text(text)
    yield from ((chunk, i == len(chunks) - 1) for i, chunk in enumerate(chunks))
