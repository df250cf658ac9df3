"""Where text normalisation may stop early: sentence ends that no number, date, unit or abbreviation spans, so
that normalising the text up to one of them gives the start of what normalising the whole text gives
(`normalize.normalized_parts`, which checks it on every run).

A cut is made only between two plain sentences: in English after a word of letters only (two or more, no
abbreviation: "No. 5", "Dec. 4", "p.m. Then", "U. S." never qualify) closed by one final mark, then exactly one
space and a capitalised word; in Chinese after a sentence mark between two Han characters. WeTextProcessing's
tokens that span a space or a mark (dates, "No. 12", initials, addresses, serials, telephone numbers) all need a
digit, an initial or an abbreviation at one side of such a cut. Never inside a `[...]` span (tags and
pronunciations are held out of normalisation as a whole).
"""
from __future__ import annotations

import bisect
import re

from engine.text.chunk import ABBREVIATIONS

_WORD_END = re.compile(r"(?<!\S)([A-Za-z]{2,})[.!?](?= [A-Z][a-z])")
_HAN_END = re.compile(r"(?<=[\u4e00-\u9fff])[。！？](?=[\u4e00-\u9fff])")
# words that end a sentence only rarely and that WeTextProcessing reads with what follows or precedes them
_NOT_ENDS = frozenset(
    {word.rstrip(".").lower() for word in ABBREVIATIONS if "." not in word.rstrip(".")}
    | {"am", "pm", "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun", "bldg", "apt"}
)


def safe_cuts(text: str, lang: str, held_out: list[tuple[int, int]]) -> list[int]:
    """Offsets (ascending) after which `text` may be cut for normalisation in `lang` ("en", "zh" or another
    language's id: num2words reads bare digits only, so both kinds of sentence end are safe there), none inside
    the `held_out` spans (sorted, disjoint: the markup normalisation leaves alone)."""
    cuts = []
    if lang != "zh":
        cuts += [m.end() for m in _WORD_END.finditer(text) if m.group(1).lower() not in _NOT_ENDS]
    if lang != "en":
        cuts += [m.end() for m in _HAN_END.finditer(text)]
    starts = [begin for begin, _ in held_out]
    return sorted(cut for cut in cuts if (i := bisect.bisect_left(starts, cut) - 1) < 0 or held_out[i][1] <= cut)
