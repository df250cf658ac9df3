"""Text shaping: cleaning, upstream's prompt text and chunks, and the streaming splitter."""
import json
import random
import time
from pathlib import Path

import pytest

from engine.errors import TextInputError
from engine.text.chunk import (
    ABBREVIATIONS,
    SENTENCE,
    chunk_text,
    chunk_text_for_duration,
    cut_points,
    stream_chunks,
)
from engine.text.clean import add_punctuation, clean_text, combine_text
from engine.text.duration import text_weight, weight_per_second

GOLDENS = json.loads((Path(__file__).parents[1] / "data" / "goldens" / "text.json").read_text("utf-8"))

MIXED = "Grüße, 世界! こんにちは 안녕 नमस्ते مرحبا שלום Привет e\u0301 👩\u200d💻 🇫🇷 [laughter] 3.5 km"


def without_whitespace(text: str) -> str:
    return "".join(text.split())


def random_text(rng: random.Random, n_pieces: int) -> str:
    pieces = [
        "word", "longer", "sentence.", "clause,", "Mr.", "e.g.", "3.14", "你好。", "世界，", "🎉",
        "नमस्ते", "e\u0301", "\n", "\n\n", "  ", "\t", "?!", "“quoted.”", "(aside)", "……", "x" * 40,
    ]
    return "".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(n_pieces))


# --- clean_text -----------------------------------------------------------------------------

def test_clean_text_keeps_every_script_emoji_and_mark():
    assert clean_text(MIXED) == MIXED


def test_clean_text_keeps_the_whitespace_upstream_handles():
    assert clean_text("one\ttwo\r\nthree\n") == "one\ttwo\r\nthree\n"


def test_clean_text_drops_controls_and_keeps_word_breaks():
    assert clean_text("be\x00ep\x07 a\x1b[0m\x7f") == "beep a[0m"
    assert clean_text("page\x0cbreak\x1frecord\x85next") == "page break record next"
    assert clean_text("lone \ud800surrogate") == "lone surrogate"


@pytest.mark.parametrize("bad", ["", "   ", "\n\t ", "\x00\x01", "\u3000"])
def test_clean_text_refuses_empty_text(bad):
    with pytest.raises(TextInputError):
        clean_text(bad)


def test_clean_text_refuses_non_strings():
    with pytest.raises(TextInputError):
        clean_text(None)


# --- upstream prompt text -------------------------------------------------------------------

@pytest.mark.parametrize("case", GOLDENS["strings"], ids=lambda case: repr(case["text"][:24]))
def test_prompt_text_matches_upstream(case):
    for ref_text, combined in case["combine_text"].items():
        assert combine_text(case["text"], None if ref_text == "None" else ref_text) == combined
    assert add_punctuation(case["text"]) == case["add_punctuation"]


def test_combine_text_joins_reference_and_target():
    assert combine_text("  Target text. ", " Reference. ") == "Reference. Target text."
    assert combine_text("Only target.", "") == "Only target."


def test_combine_text_shapes_whitespace_like_upstream():
    # Line breaks vanish without a space; spaces beside Han characters go.
    assert combine_text("line one\nline two\r\n") == "line oneline two"
    assert combine_text("a  \t b （注） 中 文 text") == "a b (注)中文text"


def test_add_punctuation():
    assert add_punctuation("  hello ") == "hello."
    assert add_punctuation("你好") == "你好。"
    assert add_punctuation("done!") == "done!"
    assert add_punctuation("   ") == ""


# --- upstream long-text chunks ----------------------------------------------------------------

@pytest.mark.parametrize("name", list(GOLDENS["chunks"]))
def test_chunks_match_upstream(name):
    case = GOLDENS["chunks"][name]
    assert chunk_text(case["text"], case["chunk_len"], case["min_chunk_len"]) == case["chunks"]
    if "target_tokens" in case:
        chunks = chunk_text_for_duration(case["text"], case["target_tokens"], case["audio_chunk_duration"])
        assert chunks == case["chunks"]


def test_chunk_text_loses_nothing_and_respects_the_limit():
    rng = random.Random(0)
    for _ in range(200):
        text = random_text(rng, rng.randint(1, 80))
        limit = rng.choice([10, 40, 120])
        chunks = chunk_text(text, limit)
        assert without_whitespace("".join(chunks)) == without_whitespace(text)
        assert all(chunk == chunk.strip() and chunk for chunk in chunks)


def test_chunk_text_does_not_split_abbreviations():
    text = "Dr. Smith met Mrs. Jones. They talked."
    assert chunk_text(text, 10) == ["Dr. Smith met Mrs. Jones.", "They talked."]
    assert {"Dr.", "Mrs.", "e.g."} <= ABBREVIATIONS


# --- stream_chunks ----------------------------------------------------------------------------

def test_stream_chunks_lose_nothing():
    rng = random.Random(1)
    for _ in range(300):
        text = random_text(rng, rng.randint(1, 150))
        if not text.strip():
            continue
        chunks = stream_chunks(text)
        assert without_whitespace("".join(chunks)) == without_whitespace(text)
        assert all(chunk == chunk.strip() and chunk for chunk in chunks)


def test_stream_chunks_keep_mixed_scripts_and_emoji_intact():
    assert stream_chunks(MIXED, first_max_seconds=60, max_seconds=60) == [MIXED]


def test_first_chunk_is_the_first_long_enough_clause():
    text = ("Hi, welcome to the show, where we talk about science and history every week. "
            "Today we have a guest. She studies stars.")
    chunks = stream_chunks(text)
    assert chunks[0] == "Hi, welcome to the show,"  # "Hi," alone is under a second
    assert chunks[1:] == ["where we talk about science and history every week. Today we have a guest. "
                          "She studies stars."]


def test_later_chunks_pack_whole_sentences_up_to_the_budget():
    sentence = "This sentence is about three seconds of speech. "
    chunks = stream_chunks("Hello there, friend. " + sentence * 20, max_seconds=10)
    budget = 10 * weight_per_second()
    assert all(chunk.endswith(".") for chunk in chunks[1:])
    assert all(text_weight(chunk) <= budget for chunk in chunks[1:-1])
    assert text_weight(chunks[-1]) <= budget + weight_per_second()  # a tiny tail (< 1 s) joins it
    assert len(chunks[1]) > len(sentence)  # several sentences per chunk


def test_cjk_punctuation_splits():
    text = "你好，欢迎来到我们的节目。今天我们有一位特别的嘉宾，她是物理学教授，写过很多书。让我们开始吧！"
    chunks = stream_chunks(text, max_seconds=6)
    assert chunks == ["你好，欢迎来到我们的节目。", "今天我们有一位特别的嘉宾，她是物理学教授，写过很多书。",
                      "让我们开始吧！"]


def test_text_without_punctuation_splits_at_spaces():
    words = [f"word{i}" for i in range(200)]
    chunks = stream_chunks(" ".join(words))
    assert [w for chunk in chunks for w in chunk.split(" ")] == words
    assert text_weight(chunks[0]) <= 3 * weight_per_second()


def test_text_without_spaces_or_punctuation_splits_every_few_characters():
    text = "这是一段没有任何标点符号的中文文本" * 20
    chunks = stream_chunks(text, max_seconds=5)
    assert "".join(chunks) == text
    assert all(text_weight(chunk) <= 5 * weight_per_second() for chunk in chunks[:-1])
    assert text_weight(chunks[-1]) <= 6 * weight_per_second()  # a tiny tail (< 1 s) joins it
    assert len(chunks) > 5


def test_hard_cuts_keep_combining_marks_and_emoji_sequences_whole():
    chunks = stream_chunks("e\u0301" * 500 + "👩\u200d💻" * 300, first_max_seconds=1, max_seconds=2)
    assert all(not chunk.startswith(("\u0301", "\u200d")) and not chunk.endswith("\u200d") for chunk in chunks)


def test_abbreviations_decimals_and_times_are_not_cut():
    text = "Dr. Smith paid 3.50 dollars at 10:30 today, e.g. for coffee. " * 30
    chunks = stream_chunks(text, first_max_seconds=2, max_seconds=4, min_seconds=0.1)
    assert not any(chunk.endswith(("Dr.", "3.", "10:", "e.g.")) for chunk in chunks)


@pytest.mark.parametrize("text", ["Some fruit (e.g. apples) is sweet.", "Some fruit—e.g. apples—is sweet.",
                                  "I met (Dr. Smith) today.", "He is an ex-Gov. of the state.", "Ask 'Mr. Jones' now."])
def test_an_abbreviation_after_a_bracket_quote_or_dash_ends_no_sentence(text):
    """Our splitter's word is what precedes the full stop back to anything but letters, digits, dots and
    apostrophes (engine/text/clauses.py's word): "(e.g." is "e.g.". Upstream's chunk_text splits at whitespace
    only and cuts after "(e.g.": kept, it is upstream's."""
    offsets, kinds = cut_points(text)
    assert [offset for offset, kind in zip(offsets, kinds) if kind >= SENTENCE] == [len(text)]


def test_upstream_chunks_still_cut_after_an_abbreviation_glued_to_a_bracket():
    assert chunk_text("Some fruit (e.g. apples) is sweet.", 10) == ["Some fruit (e.g.", "apples) is sweet."]


def test_a_blank_line_ends_a_chunk():
    chunks = stream_chunks("Chapter One\n\nIt was a cold morning in the old town by the sea. The end came later.")
    assert chunks[0] == "Chapter One"


def test_a_tiny_last_piece_joins_the_previous_chunk():
    chunks = stream_chunks("Hello there, my dear friend. Ok.")
    assert chunks == ["Hello there, my dear friend. Ok."]


def test_leading_whitespace_does_not_make_an_empty_first_chunk():
    chunks = stream_chunks("\n" * 100 + "Hello there, my dear friend, how are you doing today?")
    assert chunks[0] == "Hello there, my dear friend,"


@pytest.mark.parametrize("bad", ["", "  \n\t ", None])
def test_stream_chunks_refuse_empty_text(bad):
    with pytest.raises(TextInputError):
        stream_chunks(bad)


@pytest.mark.parametrize(
    "text",
    [
        random_text(random.Random(2), 12000),  # ~60k characters of everything
        "a" * 50_000,  # no break at all
        ". " * 25_000,  # a break everywhere
        "Mr. " * 12_500,  # abbreviations everywhere
        "字" * 50_000,
    ],
)
def test_fifty_thousand_characters_split_fast(text):
    start = time.perf_counter()
    chunks = stream_chunks(text)
    assert time.perf_counter() - start < 1.0
    assert without_whitespace("".join(chunks)) == without_whitespace(text)


def test_one_line_break_does_not_force_a_cut():
    """A text pasted with its lines wrapped is one piece while it fits; only a blank line ends a chunk."""
    from engine.text.chunk import stream_chunks

    wrapped = "The rain fell on the old\nroof all night\nlong"
    assert stream_chunks(wrapped, first_max_seconds=12.0) == [wrapped]
    assert stream_chunks("The rain fell all night.\n\nMorning came late.", first_max_seconds=12.0) == [
        "The rain fell all night.", "Morning came late."]
