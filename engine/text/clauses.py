"""Text that is still being written (a language model's answer, typed in pieces) cut into clauses, each let go
as soon as it is complete, so that it can be spoken while the rest is still being written.

A clause ends at a sentence end: a sentence mark of any script engine/text/chunk.py knows (. ! ? … 。 ！ ？ । ؟ ...
with closing quotes and brackets, an abbreviation's full stop excepted) or a line break. The first clause of
an answer may also end at a clause mark (, ; : and their CJK forms) once it holds `min_first_s` of speech, so
the first sound comes early, as the engine's own short first chunk. When `max_wait_s` of speech waits without
an end, the waiting text is cut by the streaming rule (`chunk.first_cut`: at a clause mark, else between words,
else between characters). Seconds of speech are judged by the engine's character weights.

A sentence mark that is the last character received ends its clause at once, without waiting for the next
token, unless what came before it says the sentence may go on (`_may_go_on`): a digit before a full stop ("3."
of "3.14"), an initial or a dotted word ("e." of "e.g.", "U.S."), a quote or bracket the clause opened and has
not closed (its closer may follow the mark). Those wait for the character after the mark, as a comma does; an
abbreviation's full stop ("Dr.") is no end at all. An end taken too early costs little: what the next token
glues to the mark ("?" then "!", "." then "..", a closing quote), marks and closers followed by whitespace, adds
nothing to be said and is dropped; text glued to it ("example." then "com") starts the next clause. At `finish`
every end counts. A piece without a letter ("1." of a list) is not a clause of its own: it joins the next.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.text.chunk import CLAUSE, CLOSERS, FINAL_MARKS, SENTENCE, cut_points, first_cut, last_word
from engine.text.duration import text_weight, weight_per_second


@dataclass(frozen=True)
class ClauseRules:
    min_first_s: float = 1.0  # the first clause may end at a comma once it holds this much speech
    max_wait_s: float = 8.0  # this much speech without a sentence end is cut and spoken


class ClauseBuffer:
    """`add` the text as it arrives and get the clauses it completed; `finish` gives the rest."""

    def __init__(self, rules: ClauseRules = ClauseRules()):
        self.rules = rules
        self._waiting = ""
        self._clauses = 0  # let go so far
        self._ended_at_edge = False  # the last clause ended at the last character then received

    @property
    def waiting(self) -> str:
        """The text received and not yet let go."""
        return self._waiting

    def add(self, text: str) -> list[str]:
        """Append `text` (any piece: a token, a word, several sentences); the clauses it completed, in order."""
        self._waiting += text
        if self._ended_at_edge:
            self._waiting, self._ended_at_edge = _without_glued_marks(self._waiting, final=False)
        return self._let_go(final=False)

    def finish(self) -> list[str]:
        """The text ended: the clauses left, in order (none when only whitespace waits)."""
        if self._ended_at_edge:
            self._waiting, self._ended_at_edge = _without_glued_marks(self._waiting, final=True)
        clauses = self._let_go(final=True)
        rest, self._waiting = self._waiting.strip(), ""
        if rest:
            clauses.append(rest)
            self._clauses += 1
        return clauses

    def _let_go(self, final: bool) -> list[str]:
        clauses = []
        while (end := self._end(self._waiting.lstrip(), final)) is not None:
            text = self._waiting.lstrip()
            clauses.append(text[:end].strip())
            self._waiting = text[end:]
            self._clauses += 1
            self._ended_at_edge = not final and not self._waiting
        return clauses

    def _end(self, text: str, final: bool) -> int | None:
        """Where the next clause of `text` ends, or None while it is not complete."""
        rate = weight_per_second()
        offsets, kinds = cut_points(text)
        for offset, kind in zip(offsets, kinds):
            if offset >= len(text) and not final:  # nothing after the mark yet
                if kind >= SENTENCE and _has_letter(text) and not _may_go_on(text):
                    return offset
                break
            if kind >= SENTENCE and _has_letter(text[:offset]):
                return offset
            if kind == CLAUSE and self._clauses == 0 and text_weight(text[:offset]) >= self.rules.min_first_s * rate:
                return offset
        max_weight = self.rules.max_wait_s * rate
        if text_weight(text) > max_weight:
            return first_cut(text, max_weight, min_weight=max_weight / 4)
        return None


def _has_letter(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


_PAIRS = ("“”", "()", "[]", "{}", "«»", "「」", "『』", "（）", "【】", "《》", "〈〉")  # opener, closer


def _may_go_on(text: str) -> bool:
    """`text` ends with a sentence mark (and maybe closers): may the characters still to come show that the mark
    ends no sentence, or that more of the sentence follows it? Yes after a digit ("3." of "3.14"), a single
    letter or a dotted word ("e." of "e.g.", "U.S."), and while a quote or bracket the text opened is open."""
    if text.count('"') % 2 or any(text.count(opener) > text.count(closer) for opener, closer in _PAIRS):
        return True
    body = text.rstrip(CLOSERS)
    if not body.endswith("."):
        return False
    word = last_word(body, len(body) - 1)
    return word[-1:].isdigit() or len(word) == 1 or "." in word


def _without_glued_marks(text: str, final: bool) -> tuple[str, bool]:
    """The text after a clause that ended at the last character then received, without the marks and closers
    glued to that end ("?" then "!", then whitespace): they belonged to the clause already spoken. Also whether
    it is still undecided (nothing but such marks has arrived yet, and more may come)."""
    glued = len(text) - len(text.lstrip(FINAL_MARKS + CLOSERS))
    if glued == len(text):
        return ("", False) if final else (text, True)
    return (text[glued:], False) if glued and text[glued].isspace() else (text, False)
