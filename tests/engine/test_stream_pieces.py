"""The streaming splitter over a text that arrives in parts (as normalisation makes it): the same chunks as the
whole text at once, each given as soon as no later part can change it, having read no more than that needs."""
import random

import pytest

from engine.errors import TextInputError
from engine.text.chunk import cut_points, stream_chunks, stream_pieces

# what makes a cut depend on what follows: marks before a letter, closers, blank lines split across parts, runs of
# marks, abbreviations, text without spaces (hard cuts), combining marks and joiners, a short last chunk
TOKENS = ["word", "longerword", "a", "I", "Dr.", "No.", "e.g.", "(e.g.", "5", "3.5", ",", ".", "!", "?", "...",
          ":", ";", "\n", "\n\n", " ", "  ", "。", "，", "你好", "今天天气很好", "x" * 80, '"', "”", ")", "»", "—",
          "Hello.", "end.)", 'stop!"', "\t", "🙂", "e\u0301", "👩\u200d💻"]


def tricky_text(rng: random.Random) -> str:
    return "".join(rng.choice(TOKENS) + (" " if rng.random() < 0.6 else "") for _ in range(rng.randint(1, 300)))


def in_parts(text: str, rng: random.Random) -> list[str]:
    """`text` cut at random places, empty and one-character parts included."""
    cuts = sorted(rng.choices(range(len(text) + 1), k=rng.randint(0, 60)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def test_chunks_of_a_text_in_parts_equal_those_of_the_whole_text():
    rng = random.Random(3)
    for _ in range(800):
        text = tricky_text(rng)
        if not text.strip():
            continue
        seconds = {} if rng.random() < 0.7 else {"first_max_seconds": rng.choice([0.5, 3, 6]),
                                                  "max_seconds": rng.choice([2, 5, 30]),
                                                  "min_seconds": rng.choice([0.2, 1, 2])}
        whole = stream_chunks(text, **seconds)
        pieces = list(stream_pieces(in_parts(text, rng), **seconds))
        assert [chunk for chunk, _ in pieces] == whole, text
        assert [last for _, last in pieces] == [i == len(whole) - 1 for i in range(len(whole))]


def test_cut_points_of_a_growing_text_are_those_of_the_whole_text():
    from engine.text.chunk import _CutPoints

    rng = random.Random(4)
    for _ in range(500):
        text = tricky_text(rng)
        whole_offsets, whole_kinds = cut_points(text)
        cuts, read = _CutPoints(), ""
        for part in in_parts(text, rng):
            read += part
            cuts.scan(read, complete=False)
            # what it holds before `settled` is what the whole text holds there
            settled = sum(offset < cuts.settled for offset in cuts.offsets)
            assert cuts.offsets[:settled] == whole_offsets[:settled]
            assert cuts.kinds[:settled] == whole_kinds[:settled]
        cuts.scan(read, complete=True)
        assert (cuts.offsets, cuts.kinds) == cut_points(text)


def test_a_mark_at_the_end_of_a_part_is_read_again_with_the_next():
    # "a. b" ends a sentence after "a."; "a.b" does not: the part "a." alone cannot say which
    assert list(stream_pieces(["One two three four five six seven eight nine ten eleven.",
                               "b twelve thirteen fourteen fifteen sixteen seventeen eighteen"])) == \
        [(chunk, i == 1) for i, chunk in enumerate(stream_chunks(
            "One two three four five six seven eight nine ten eleven.b twelve thirteen fourteen fifteen sixteen "
            "seventeen eighteen"))]
    # a line break at the end of a part and another at the start of the next: a blank line
    text = "First line is here\n\nsecond line is here too"
    assert [c for c, _ in stream_pieces(["First line is here\n", "\nsecond line is here too"])] == \
        stream_chunks(text) == ["First line is here", "second line is here too"]


def test_the_first_piece_is_given_before_the_rest_is_read():
    sentence = "This sentence takes a few seconds to say, and then it ends. "
    read = []

    def parts():
        for i in range(200):
            read.append(i)
            yield sentence

    pieces = stream_pieces(parts())
    first, last = next(pieces)
    assert first == "This sentence takes a few seconds to say," and not last
    assert len(read) <= 2  # its own sentence, and one more to know nothing joins it
    assert len(list(pieces)) > 50 and len(read) == 200


def test_a_tiny_last_piece_joins_a_chunk_whose_end_was_settled_before_the_text_was_all_read():
    # the second chunk's 12 s end falls right on "x.": settled once " O" is read, while " Ok." is still to come
    middle = "word " * 22 + "x" * 76 + "."
    text = "Hi there, friend. " + middle + " Ok."
    expected = [("Hi there, friend.", False), (middle + " Ok.", True)]
    assert list(stream_pieces(list(text))) == list(stream_pieces([text])) == expected


def test_nothing_but_whitespace_in_parts_is_refused_once_read():
    with pytest.raises(TextInputError):
        list(stream_pieces([" ", "\n\n", "\t"]))


def test_a_chunk_followed_by_whitespace_alone_is_the_last():
    text = "A sentence that is long enough to be a chunk of its own, and then some more words to say. " * 3
    text += " " * 100  # heavier than a short last chunk, and nothing to say
    pieces = list(stream_pieces(list(text)))
    assert [last for _, last in pieces] == [False] * (len(pieces) - 1) + [True]
    assert [chunk for chunk, _ in pieces] == stream_chunks(text)


def long_stretch_text(rng: random.Random) -> str:
    """Long stretches where no boundary starts (Chinese without punctuation, one endless word) between ordinary
    words and marks: the splitter must cut them by hand, wherever the parts happen to end."""
    stretches = ["今天天气很好我们去公园散步", "x", "ab", "e\u0301"]
    pieces = [rng.choice(stretches) * rng.randint(20, 400) if rng.random() < 0.5 else rng.choice(TOKENS)
              for _ in range(rng.randint(1, 12))]
    return "".join(piece + (" " if rng.random() < 0.3 else "") for piece in pieces)


def test_texts_with_long_stretches_without_boundaries_split_in_parts_as_whole():
    rng = random.Random(5)
    for _ in range(150):
        text = long_stretch_text(rng)
        if not text.strip():
            continue
        size = rng.choice([1, 3, 10, 97])
        parts = [text[i:i + size] for i in range(0, len(text), size)] if rng.random() < 0.5 else in_parts(text, rng)
        whole = stream_chunks(text)
        assert list(stream_pieces(parts)) == [(chunk, i == len(whole) - 1) for i, chunk in enumerate(whole)], text


class _CountingBoundary:
    """The boundary pattern, counting how many characters each scan hands it to read."""

    def __init__(self, pattern):
        self.pattern, self.read = pattern, 0

    def finditer(self, text: str, pos: int = 0):
        self.read += len(text) - pos
        return self.pattern.finditer(text, pos)


@pytest.mark.parametrize("text", ["今天天气很好我们去公园散步" * 400, "x" * 5000,
                                  "Short words, and sentences. " * 200, "word" + " " * 40 + "end. " * 1000])
def test_a_text_in_many_parts_is_read_about_once(monkeypatch, text):
    from engine.text import chunk

    whole = stream_chunks(text)
    counting = _CountingBoundary(chunk._BOUNDARY)
    monkeypatch.setattr(chunk, "_BOUNDARY", counting)
    assert [c for c, _ in stream_pieces([text[i:i + 10] for i in range(0, len(text), 10)])] == whole
    # each place once, and a boundary still open at a part's end (here at most 40 characters) again with the next
    # parts; reading on from the last boundary read every part of the first two texts again (quadratic)
    assert counting.read <= 2 * len(text), (counting.read, len(text))
