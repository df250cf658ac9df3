"""Text ids: upstream goldens on the tiny checkpoint's tokenizer; non-verbal tags are encoded on
their own, with either kind of tokenizer."""
import json
from pathlib import Path

import pytest
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import PreTrainedTokenizerFast

from engine.constants import DEMO_MODEL
from engine.text.clean import combine_text
from engine.text.tokens import NONVERBAL_TAGS, encode_text

DATA = Path(__file__).parents[1] / "data"
GOLDENS = json.loads((DATA / "goldens" / "text.json").read_text("utf-8"))


@pytest.mark.parametrize("kind", ["tokenizers", "transformers"])
def test_text_ids_match_upstream(kind):
    tokenizer = Tokenizer.from_file(str(DEMO_MODEL / "tokenizer.json"))
    if kind == "transformers":
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    for case in GOLDENS["strings"]:
        wrapped = f"<|text_start|>{combine_text(case['text'])}<|text_end|>"
        assert encode_text(tokenizer, wrapped) == case["text_ids"], case["text"]

CORPUS = [
    "ha ha [laughter] that was funny [sigh] oh well",
    "哈哈[laughter]真好笑[sigh]算了吧",
    "question [question-en] yes [confirmation-en] hmm [dissatisfaction-hnn]",
    "[music] is not a tag, nor is [laughing] or [ laughter ]",
] * 20


@pytest.fixture(scope="module")
def fast_tokenizer() -> Tokenizer:
    """A byte-level BPE trained on text where tags sit inside words, so context would change them."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|text_start|>", "<|text_end|>", "<bos>"])
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens([AddedToken("<|text_start|>", special=True), AddedToken("<|text_end|>", special=True)])
    return tok


@pytest.fixture(scope="module", params=["tokenizers", "transformers"])
def tokenizer(request, fast_tokenizer):
    if request.param == "tokenizers":
        return fast_tokenizer
    return PreTrainedTokenizerFast(tokenizer_object=fast_tokenizer)


def ids(tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def test_tags_are_encoded_standalone(tokenizer, fast_tokenizer):
    text = "<|text_start|>哈哈[laughter]真好笑 [sigh]ha[question-en]<|text_end|>"
    expected = (ids(fast_tokenizer, "<|text_start|>哈哈") + ids(fast_tokenizer, "[laughter]")
                + ids(fast_tokenizer, "真好笑 ") + ids(fast_tokenizer, "[sigh]") + ids(fast_tokenizer, "ha")
                + ids(fast_tokenizer, "[question-en]") + ids(fast_tokenizer, "<|text_end|>"))
    assert encode_text(tokenizer, text) == expected
    assert expected != ids(fast_tokenizer, text)  # the test tokenizer does merge across tags


def test_each_tag_gets_the_same_ids_anywhere(tokenizer, fast_tokenizer):
    for tag in NONVERBAL_TAGS:
        alone = ids(fast_tokenizer, f"[{tag}]")
        encoded = encode_text(tokenizer, f"x[{tag}]y")
        assert encoded == ids(fast_tokenizer, "x") + alone + ids(fast_tokenizer, "y")


def test_other_brackets_are_plain_text(tokenizer, fast_tokenizer):
    text = "a [music] b [laughing] c [ laughter ]"
    assert encode_text(tokenizer, text) == ids(fast_tokenizer, text)


def test_text_that_encodes_to_nothing_gets_the_default_special_tokens(fast_tokenizer):
    with_bos = Tokenizer.from_str(fast_tokenizer.to_str())
    bos = with_bos.token_to_id("<bos>")
    with_bos.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", bos)])
    assert encode_text(with_bos, "") == [bos]
    assert encode_text(with_bos, "hi") == ids(with_bos, "hi")  # no special tokens otherwise
