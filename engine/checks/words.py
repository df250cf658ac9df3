"""The words check: a transcript of the take against the text it should say.

Both sides go through the same normaliser (Whisper's own, from transformers: case, punctuation,
contractions, spelled-out numbers -> digits for English; a basic one for other languages), then
the word error rate is (substitutions + deletions + insertions) / words of the text. Scripts
written without spaces (Chinese, Japanese) are compared character by character."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from engine.checks.verdict import Check

_NO_SPACES = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")  # kana, CJK ideographs
_ENGLISH = {"en", "english"}


@lru_cache(maxsize=1)
def _normalizers():
    from transformers.models.whisper.english_normalizer import BasicTextNormalizer, EnglishTextNormalizer

    return EnglishTextNormalizer({}), BasicTextNormalizer()


def tokens(text: str, language: str | None = None) -> list[str]:
    """Normalised words of `text` (characters for scripts without spaces). `language` None or
    "auto": English rules when the text is plain ASCII."""
    english, basic = _normalizers()
    if _NO_SPACES.search(text):
        return [ch for ch in basic(text) if not ch.isspace()]
    auto = language in (None, "", "auto")
    is_english = (language or "").lower() in _ENGLISH or (auto and text.isascii())
    return (english if is_english else basic)(text).split()


@dataclass
class WordScore:
    wer: float
    words: int  # in the text
    missing: list[str] = field(default_factory=list)  # said in the text, not in the take
    extra: list[str] = field(default_factory=list)  # in the take only (repeats, inventions)
    wrong: list[tuple[str, str]] = field(default_factory=list)  # (text word, heard instead)


def align(ref: list[str], hyp: list[str]) -> list[tuple[str | None, str | None]]:
    """Minimum-edit alignment (Levenshtein, unit costs) as pairs: (r, h) match or substitution,
    (r, None) deletion, (None, h) insertion."""
    n, m = len(ref), len(hyp)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        cost[i][0] = i
    for j in range(m + 1):
        cost[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost[i][j] = min(cost[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]), cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    pairs, i, j = [], n, m
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            pairs.append((ref[i - 1], hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i and cost[i][j] == cost[i - 1][j] + 1:
            pairs.append((ref[i - 1], None))
            i -= 1
        else:
            pairs.append((None, hyp[j - 1]))
            j -= 1
    return pairs[::-1]


def score_words(text: str, transcript: str, language: str | None = None) -> WordScore:
    ref, hyp = tokens(text, language), tokens(transcript, language)
    score = WordScore(0.0, len(ref))
    for r, h in align(ref, hyp):
        if h is None:
            score.missing.append(r)
        elif r is None:
            score.extra.append(h)
        elif r != h:
            score.wrong.append((r, h))
    errors = len(score.missing) + len(score.extra) + len(score.wrong)
    score.wer = errors / len(ref) if ref else float(errors > 0)
    return score


def check_words(text: str, transcript: str, max_wer: float, language: str | None = None) -> Check:
    s = score_words(text, transcript, language)
    passed = s.wer <= max_wer
    parts = []
    if s.missing:
        parts.append(f"missing '{_few(s.missing)}'")
    if s.extra:
        parts.append(f"extra '{_few(s.extra)}'")
    if s.wrong:
        parts.append("heard " + ", ".join(f"'{h}' for '{r}'" for r, h in s.wrong[:3]))
    return Check("words", s.wer, max_wer, passed, "" if passed else f"{'; '.join(parts)} (heard: {transcript!r})")


def _few(words: list[str], limit: int = 6) -> str:
    return " ".join(words[:limit]) + (" …" if len(words) > limit else "")
