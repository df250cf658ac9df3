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
    """(text, add_special_tokens) -> ids, for a `tokenizers.Tokenizer` or a transformers tokenizer."""
    if isinstance(tokenizer, Tokenizer):
        return lambda text, special: tokenizer.encode(text, add_special_tokens=special).ids
    return lambda text, special: list(tokenizer(text, add_special_tokens=special)["input_ids"])


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
