"""The Engine's batched paths on the demo checkpoint (CPU): streamed sentences generated in growing groups
and takes of one line generated together each equal their lone render, on the eager reference loop and
through the graph runner's static algorithm (no graphs on a CPU); the first piece still comes alone."""
import numpy as np
import pytest
import torch

import engine.engine as engine_module
import engine.lm.batch as batch_module
from engine.config import MAX_SEED, GenerationConfig
from engine.engine import ahead_groups
from engine.lm.runner import StaticRunner
from engine.voice import Voice

TEXT = ("First words here.\n\nThe second sentence.\n\nA third one is here.\n\nThen there is a fourth.\n\n"
        "And the fifth is last.")  # five pieces: a blank line ends each
CFG = GenerationConfig(num_step=4, seed=40)


@pytest.fixture(params=["eager", "runner"])
def path(request, engine, monkeypatch):
    """The eager reference loop, or the runner (its batches spied on: the sequences each running batch took)."""
    calls = []
    if request.param == "runner":
        class Counted(batch_module.ContinuousBatch):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                calls.append(0)

            def add(self, *args):
                calls[-1] += 1
                return super().add(*args)

        monkeypatch.setattr(batch_module, "ContinuousBatch", Counted)
        monkeypatch.setattr(engine, "runner", StaticRunner(engine.lm, buckets=(256, 512, 1024)))
    else:
        generate = batch_module.generate_tokens
        monkeypatch.setattr(batch_module, "generate_tokens", lambda lm, prompts, *a, **k: calls.append(len(prompts))
                            or generate(lm, prompts, *a, **k))
    return calls


def test_groups_start_with_the_first_piece_alone_then_double():
    assert [list(g) for g in ahead_groups(range(8), checking=False)] == [[0], [1, 2], [3, 4, 5, 6], [7]]
    assert [len(g) for g in ahead_groups(range(100), checking=False)][:7] == [1, 2, 4, 8, 16, 16, 16]
    assert [list(g) for g in ahead_groups(range(3), checking=True)] == [[0], [1], [2]]


def test_streamed_groups_equal_each_piece_alone(engine, voice, path):
    chunks = list(engine.stream(TEXT, voice, config=CFG))
    assert len(chunks) == 5 and path == [1, 2, 2]  # the first piece alone, then groups in one batch each
    for chunk in chunks:
        alone = engine.synthesize(chunk.text, voice, config=CFG.replace(seed=CFG.seed + chunk.index))
        assert chunk.seed == alone.seed
        np.testing.assert_array_equal(chunk.audio, alone.audio)


def test_without_a_voice_the_first_piece_is_the_voice_of_the_batched_rest(engine, path):
    chunks = list(engine.stream(TEXT, config=CFG))
    first = engine.synthesize(chunks[0].text, config=CFG)
    np.testing.assert_array_equal(chunks[0].audio, first.audio)
    its_voice = Voice(tokens=first.tokens[0], transcript=chunks[0].text, rms=None)
    for chunk in chunks[1:]:
        alone = engine.synthesize(chunk.text, its_voice, config=CFG.replace(seed=CFG.seed + chunk.index))
        np.testing.assert_array_equal(chunk.audio, alone.audio)


def test_takes_are_one_batch_and_each_equals_its_lone_render(engine, voice, path):
    takes = engine.takes("One line, four takes.", voice, config=CFG, n=4)
    assert path == [4]
    for j, take in enumerate(takes):
        alone = engine.synthesize("One line, four takes.", voice, config=CFG.replace(seed=CFG.seed + j))
        assert take.seed == CFG.seed + j and all(a.equal(b) for a, b in zip(take.tokens, alone.tokens))
    assert not takes[0].tokens[0].equal(takes[1].tokens[0])


def test_requests_with_other_settings_are_not_batched(engine, voice):
    from engine.request import SpeechRequest

    a = SpeechRequest(text="One.", voice=voice, config=CFG)
    b = SpeechRequest(text="Two.", voice=voice, config=CFG.replace(guidance_scale=1.0))
    with pytest.raises(ValueError, match="share their settings"):
        engine.render_many([a, b])


def test_pieces_of_one_length_decode_together_where_the_engine_says_so(engine, voice, monkeypatch):
    """With `decode_together` (a GPU's engine), the takes of one line (one length) are decoded in batches of at most
    DECODE_TOGETHER_FRAMES, a line of another length by itself, and each request keeps its own audio. The codec's
    batched decode is its one-by-one decode here, bit for bit (its rounding is tests/engine/test_codec.py's)."""
    from engine.request import SpeechRequest

    line, other = "One line, three takes.", "And another line, of another length than the first."
    requests = [SpeechRequest(text=line, voice=voice, config=CFG.replace(seed=CFG.seed + j)) for j in range(3)]
    requests.append(SpeechRequest(text=other, voice=voice, config=CFG))
    alone = [engine.render_many([request])[0] for request in requests]  # one by one: the CPU's way
    frames = alone[0].tokens[0].shape[-1]
    assert alone[3].tokens[0].shape[-1] != frames
    together, unchecked = [], engine.codec.decode_unchecked

    def one_by_one(pieces):
        if len(pieces) > 1:
            together.append(len(pieces))
        decoded = [unchecked([piece]) for piece in pieces]
        return [w for waves, _ in decoded for w in waves], [r for _, ranges in decoded for r in ranges]

    monkeypatch.setattr(engine.codec, "decode_unchecked", one_by_one)
    monkeypatch.setattr(engine_module, "DECODE_TOGETHER_FRAMES", 2 * frames)
    monkeypatch.setattr(engine, "decode_together", True)
    results = engine.render_many(requests)
    assert together == [2]  # two takes of the line together, its third alone (the cap), the other line alone
    for result, single in zip(results, alone):
        np.testing.assert_array_equal(result.audio, single.audio)


def test_waves_are_read_with_the_engine_free(engine, voice, monkeypatch):
    """The decode is queued under the engine's lock and waited for after it (on a GPU the wait is the device's whole
    batch), so what takes the lock outside the batches (voice_from_clip, reference_audio) is not held up by it, nor is
    the next batch's generation (tests/engine/test_gather_engine.py)."""
    from engine.codec import QueuedDecode

    locked, waves = [], QueuedDecode.waves
    monkeypatch.setattr(QueuedDecode, "waves", lambda self: locked.append(engine._lock.locked()) or waves(self))
    from engine.request import SpeechRequest

    engine.render_many([SpeechRequest(text="Read with the lock free.", voice=voice, config=CFG)])
    assert locked == [False]


def test_a_long_decode_keeps_at_most_two_runs_in_flight_and_hands_out_its_own_arrays(engine, monkeypatch):
    """Each run is read once the next is queued (the device always has work), so the page-locked copies of a long
    render's audio never pile up; the waves handed out are the engine's own arrays, not views of those buffers."""
    from engine.codec import QueuedDecode

    events, held, queue, waves = [], [], engine.codec.queue_decode, QueuedDecode.waves

    def queued(pieces):
        events.append("queue")
        decode = queue(pieces)
        held.append(decode)
        return decode

    monkeypatch.setattr(engine.codec, "queue_decode", queued)
    monkeypatch.setattr(QueuedDecode, "waves", lambda self: events.append("read") or waves(self))
    g = torch.Generator().manual_seed(3)
    pieces = [torch.randint(0, engine.codec.codebook_size, (8, 6 + n), generator=g) for n in range(4)]
    out = engine._decode_pieces(pieces)
    assert events == ["queue", "queue", "read", "queue", "read", "queue", "read", "read"]
    for wave, decode in zip(out, held):
        assert wave.shape == decode.host_waves[0].shape
        assert not np.shares_memory(wave, decode.host_waves[0].numpy())


def test_a_piece_longer_than_a_decode_batch_is_decoded_by_itself(engine, monkeypatch):
    """With `decode_together`, a piece of more than DECODE_TOGETHER_FRAMES frames (up to 60 s can be made in one piece:
    more than the cap's 40 s) is a run of its own, and so is each one of its length after it; their waves are their
    one-by-one decodes."""
    queued, queue = [], engine.codec.queue_decode
    monkeypatch.setattr(engine.codec, "queue_decode", lambda pieces: queued.append(len(pieces)) or queue(pieces))
    g = torch.Generator().manual_seed(5)
    pieces = [torch.randint(0, engine.codec.codebook_size, (8, 9), generator=g) for _ in range(2)]
    alone = engine._decode_pieces(pieces)  # one by one: the CPU's way
    monkeypatch.setattr(engine_module, "DECODE_TOGETHER_FRAMES", 8)
    monkeypatch.setattr(engine, "decode_together", True)
    queued.clear()
    together = engine._decode_pieces(pieces)
    assert queued == [1, 1]
    for got, want in zip(together, alone, strict=True):
        np.testing.assert_array_equal(got, want)


def test_takes_and_pieces_past_the_largest_seed_start_again_from_0(engine, voice):
    """Take j and piece i are seeded seed + j and seed + i (`offset_seed`): from the largest seed, the next is 0, whose
    lone render the take is (a seed in range has its takes and its stream's pieces)."""
    last = CFG.replace(seed=MAX_SEED)
    takes = engine.takes("One line, two takes.", voice, config=last, n=2)
    assert [take.seed for take in takes] == [MAX_SEED, 0]
    alone = engine.synthesize("One line, two takes.", voice, config=CFG.replace(seed=0))
    assert all(a.equal(b) for a, b in zip(takes[1].tokens, alone.tokens, strict=True))
    assert [chunk.seed for chunk in engine.stream(TEXT, voice, config=last)] == [MAX_SEED, 0, 1, 2, 3]
