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
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_text_tokenizer
from engine.text.clean import combine_text
from engine.text.tokens import NONVERBAL_TAGS, encode_text, encode_whole

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


TEXTS = ["<|text_start|>Hello there, how are you? [laughter] Fine.<|text_end|>", "你好，世界。[sigh]",
         "<|lang_start|>en<|lang_end|><|instruct_start|>female, low pitch<|instruct_end|>", "ß ﬁ 🙂 <|text_end|>x"]


def _loaded(**options):
    """The demo checkpoint's tokenizer as the engine loads it, or with transformers `options`."""
    return AutoTokenizer.from_pretrained(str(DEMO_MODEL), **options) if options else load_text_tokenizer(DEMO_MODEL)


def test_a_fast_tokenizer_encodes_without_its_call(monkeypatch):
    """The engine's tokenizer (transformers) gives the ids of its `__call__` without calling it: `__call__` goes
    through `encode_batch`, which gives up the GIL and waits for it again behind any busy thread."""
    tokenizer = _loaded()
    whole = [list(tokenizer(text)["input_ids"]) for text in TEXTS]
    tagged = [encode_text(tokenizer, text) for text in TEXTS]

    def refused(*args, **kwargs):
        raise AssertionError("the tokenizer's __call__ was used")

    monkeypatch.setattr(type(tokenizer), "__call__", refused)
    assert [encode_whole(tokenizer, text) for text in TEXTS] == whole
    assert [encode_text(tokenizer, text) for text in TEXTS] == tagged


def test_a_backend_set_otherwise_than_call_would_goes_through_call():
    """Truncation, padding or special-token splitting set on the Rust tokenizer other than `__call__` sets them: the
    ids are still those of `__call__` (which resets them)."""
    expected = [list(_loaded()(text)["input_ids"]) for text in TEXTS]
    truncating = _loaded()
    truncating.backend_tokenizer.enable_truncation(3)
    assert [encode_whole(truncating, text) for text in TEXTS] == expected
    padding = _loaded()
    padding.backend_tokenizer.enable_padding(length=64)
    assert [encode_whole(padding, text) for text in TEXTS] == expected
    split_expected = [list(_loaded(split_special_tokens=True)(text)["input_ids"]) for text in TEXTS]
    assert split_expected != expected  # the markers are split into pieces
    splitting = _loaded(split_special_tokens=True)
    splitting.backend_tokenizer.encode_special_tokens = False
    assert [encode_whole(splitting, text) for text in TEXTS] == split_expected
