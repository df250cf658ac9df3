"""A stream that speaks numbers and dates (demo checkpoint, CPU): its first piece comes before the rest of the text
is normalised, its pieces are those of the whole text normalised at once, and Stop is heard during normalisation,
a render's and a fixed-duration stream's too."""
import threading

import pytest
from extras import needs_tn

from engine.config import GenerationConfig
from engine.errors import Cancelled
from engine.text import normalize
from engine.text.chunk import stream_chunks, stream_pieces
from engine.text.clean import clean_text
from engine.text.normalize import normalize_text, normalized_parts

CFG = GenerationConfig(num_step=4, seed=5, normalize_text=True)
FILLER = "This sentence has words and nothing else to read. "
TEXT = "I have 5 cats, and they sleep all day long. " + FILLER * 100  # 5,144 characters


def fake_grammar(monkeypatch, grammar):
    monkeypatch.setattr(normalize, "_grammar_for", lambda lang: grammar)


def test_the_first_piece_comes_before_the_rest_of_the_text_is_normalised(engine, voice, monkeypatch):
    read = []
    fake_grammar(monkeypatch, lambda s: read.append(s) or s.replace("5", "five"))
    stream = engine.stream(TEXT, voice, config=CFG)
    first = next(stream)
    stream.close()
    assert first.text == stream_chunks(TEXT.replace("5", "five"))[0] == "I have five cats,"
    assert max(map(len, read)) < len(TEXT) / 10  # the first run only


def test_stop_is_heard_while_the_text_is_normalised(engine, voice, monkeypatch):
    cancel, release, returned = threading.Event(), threading.Event(), threading.Event()

    def slow_grammar(s):
        if len(s) > 500:  # a run after the first piece's: Stop is pressed while it works
            cancel.set()
            release.wait(60)
            returned.set()
        return s

    fake_grammar(monkeypatch, slow_grammar)
    stream = engine.stream(TEXT, voice, config=CFG, cancel=cancel)
    try:
        next(stream)
        with pytest.raises(Cancelled):
            next(stream)
        assert not returned.is_set()  # heard while the run still went on
    finally:
        release.set()


@pytest.mark.parametrize("call", ["synthesize", "stream with a duration"])
def test_stop_is_heard_while_a_whole_text_is_normalised(engine, voice, monkeypatch, call):
    """Engine.render (synthesize, takes, the Studio) and a stream of fixed duration normalise the whole text before
    anything: Stop is heard during it."""
    cancel, release, returned = threading.Event(), threading.Event(), threading.Event()

    def slow_grammar(s):
        cancel.set()  # Stop is pressed while the whole text is read
        release.wait(60)
        returned.set()
        return s

    fake_grammar(monkeypatch, slow_grammar)
    try:
        with pytest.raises(Cancelled):
            if call == "synthesize":
                engine.synthesize(TEXT, voice, config=CFG, cancel=cancel)
            else:
                next(engine.stream(TEXT, voice, config=CFG.replace(duration=30.0), cancel=cancel))
        assert not returned.is_set()  # heard while the run still went on
    finally:
        release.set()


def test_a_fixed_duration_is_shared_out_by_the_spoken_text(engine, voice, monkeypatch):
    """With a fixed duration the whole text is normalised first, and each piece's share is its length in the spoken
    text: the shares add up to the duration however much longer the spoken form is."""
    fake_grammar(monkeypatch, lambda s: s.replace("5", "five thousand five hundred and fifty five"))
    text = "I have 5 cats and 5 dogs. " * 3 + "They sleep all day long, and 5 more do too."
    cfg = CFG.replace(duration=4.0, postprocess_output=False, pad_duration=0.0)
    chunks = list(engine.stream(text, voice, config=cfg))
    spoken = text.replace("5", "five thousand five hundred and fifty five")
    assert len(chunks) >= 2 and "".join(c.text for c in chunks).replace(" ", "") == spoken.replace(" ", "")
    frames = [len(c.audio) / 960 for c in chunks]  # the codec makes 960 samples per frame; no padding
    assert frames == [int(4.0 * len(c.text) / len(spoken) * 25) for c in chunks]


@needs_tn
def test_the_pieces_are_those_of_the_whole_text_normalised_at_once():
    text = clean_text("On 3/14/2025 I paid $12.50 for 2 books. " * 3 + FILLER * 30 + "Apollo 11 landed. It was 1969. "
                      + "We met on Dec. 4, 2026 at 10:30 a.m. in Room No. 5. " * 5)
    pieces = list(stream_pieces(normalized_parts(text, "en")))
    whole = stream_chunks(normalize_text(text, "en"))
    assert [piece for piece, _ in pieces] == whole and len(whole) > 5
    assert [last for _, last in pieces] == [False] * (len(whole) - 1) + [True]
