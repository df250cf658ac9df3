"""Text to token ids, with non-verbal tags such as [laughter] encoded on their own.

A tag always gets the same ids, whatever language surrounds it, because it is never merged into
the neighbouring text by the tokenizer (upstream `_tokenize_with_nonverbal_tags`).
"""
from __future__ import annotations

import re
from collections.abc import Callable

from tokenizers import Tokenizer

NONVERBAL_TAGS = (
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
)
# One capturing group, so re.split keeps each tag as its own piece.
_TAG = re.compile(r"(\[(?:" + "|".join(map(re.escape, NONVERBAL_TAGS)) + r")\])")


def _encoder(tokenizer) -> Callable[[str, bool], list[int]]:
    """(text, add_special_tokens) -> ids, for a `tokenizers.Tokenizer` or a transformers tokenizer.

    A transformers fast tokenizer's own `tokenizers.Tokenizer` is called directly, with the settings its `__call__`
    would give it (no truncation, no padding, special tokens split as it says): `__call__` goes through
    `encode_batch`, which lets go of the GIL and then waits for a whole switch interval (5 ms) to take it back while
    another thread runs Python (the API's event loop, another stream's planning): one call took 5.4 ms instead of
    0.05 beside one busy thread, on the thread that drives the running batch."""
    backend = tokenizer if isinstance(tokenizer, Tokenizer) else getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer) and (backend is tokenizer or (
            backend.truncation is None and backend.padding is None
            and backend.encode_special_tokens == bool(getattr(tokenizer, "split_special_tokens", False)))):
        return lambda text, special: backend.encode(text, add_special_tokens=special).ids
    return lambda text, special: list(tokenizer(text, add_special_tokens=special)["input_ids"])


def encode_whole(tokenizer, text: str) -> list[int]:
    """Token ids of `text` as the tokenizer's `__call__` gives them (its special tokens added, tags not split off)."""
    return _encoder(tokenizer)(text, True)


def encode_text(tokenizer, text: str) -> list[int]:
    """Token ids of `text`, each non-verbal tag encoded separately from the text around it.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer or transformers.PreTrainedTokenizerBase
        The model's text tokenizer.
    text : str
        Text, possibly holding tags such as ``[laughter]``; other brackets are plain text.

    Returns
    -------
    list of int
        No special tokens are added, except when the text encodes to nothing at all; then it is
        encoded whole with the tokenizer's defaults (as upstream does).
    """
    encode = _encoder(tokenizer)
    ids = [i for piece in _TAG.split(text) if piece for i in encode(piece, False)]
    return ids or encode(text, True)
