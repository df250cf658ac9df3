"""Planning a request: long text without sentence breaks becomes bounded items, cut by the same rule
as the streaming chunks; a piece that could not be bounded is refused with its cause."""
import random

import pytest
import torch
from extras import needs_tn

from engine.config import GenerationConfig
from engine.constants import FRAME_RATE
from engine.errors import TextInputError
from engine.lm.plan import MAX_ITEM_SECONDS, plan_request
from engine.request import SpeechRequest
from engine.text.chunk import stream_chunks
from engine.voice import Voice

WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()


def plan_of(text, voice, language, config):
    return plan_request(SpeechRequest(text=text, voice=voice, language=language, config=config))


def words_without_stops(n_chars: int, seed: int = 0, comma_every: int | None = None) -> str:
    rng, words = random.Random(seed), []
    while sum(map(len, words)) + len(words) < n_chars:
        words.append(rng.choice(WORDS) + ("," if comma_every and len(words) % comma_every == comma_every - 1 else ""))
    return " ".join(words)


def voice(transcript: str, seconds: float) -> Voice:
    return Voice(tokens=torch.zeros(8, int(seconds * FRAME_RATE), dtype=torch.long), transcript=transcript, rms=0.1)


@pytest.mark.parametrize("speaker", [None, "voice"])
def test_text_without_sentence_breaks_becomes_items_of_about_15_s(speaker):
    text = words_without_stops(10_000)  # upstream kept this as one 700 s item (8 GB in build_cfg_batch)
    ref = voice("A short sentence to clone, said at an ordinary pace.", 3.0) if speaker else None
    plan = plan_of(text, ref, None, GenerationConfig())
    seconds = [item.target_len / FRAME_RATE for item in plan.items]
    assert len(plan.items) > 20 and max(seconds) <= 2 * GenerationConfig().audio_chunk_duration, seconds
    assert " ".join(item.text for item in plan.items) == text  # nothing lost, nothing reordered


def test_clauses_are_preferred_to_word_gaps_in_items_and_in_stream_chunks():
    text = words_without_stops(6_000, seed=1, comma_every=7)
    items = [item.text for item in plan_of(text, None, None, GenerationConfig()).items]
    streamed = stream_chunks(text)
    for pieces in (items, streamed[1:]):  # the first streamed chunk is short on purpose
        assert all(p.endswith(",") for p in pieces[:-1]), [p[-20:] for p in pieces]


def test_an_unboundable_piece_is_refused_with_its_cause():
    with pytest.raises(TextInputError, match=rf"at most {MAX_ITEM_SECONDS} s .* fixed duration \(600 s\)"):
        plan_of("Hello there.", None, None, GenerationConfig(duration=600))
    # a 60 s clip whose transcript is a lone full stop: every character would last minutes
    with pytest.raises(TextInputError, match="transcript is much shorter than what is said"):
        plan_of("Hello there, how are you?", voice(".", 60.0), None, GenerationConfig())
    plan = plan_of("Hello there.", None, None, GenerationConfig(duration=50))  # stretched, but bounded
    assert len(plan.items) == 1 and 49 * FRAME_RATE < plan.items[0].target_len <= MAX_ITEM_SECONDS * FRAME_RATE


def test_chunking_starts_above_the_threshold_not_at_it():
    """Upstream chunks when the estimate is over audio_chunk_threshold; exactly at it, one item."""
    text = "Hello there. Goodbye now. See you soon. Take care."
    at = GenerationConfig(audio_chunk_threshold=2.0, audio_chunk_duration=0.8, duration=2.0)  # 50 frames = threshold
    assert [item.target_len for item in plan_of(text, None, None, at).items] == [50]
    above = plan_of(text, None, None, at.replace(duration=2.08)).items  # 52 frames
    assert len(above) > 1


@needs_tn
def test_normalised_text_is_what_gets_planned():
    cfg = GenerationConfig(normalize_text=True)
    plan = plan_of("I have 42 apples.", None, "German", cfg)
    assert plan.items[0].text == "I have zweiundvierzig apples."
    spoken = plan_of("I have forty two apples.", None, "German", GenerationConfig())
    longer = plan_of("I have 42 apples.", None, "German", GenerationConfig())
    assert plan.items[0].target_len > longer.items[0].target_len  # the estimate counts the words
    assert spoken.items[0].target_len > longer.items[0].target_len
