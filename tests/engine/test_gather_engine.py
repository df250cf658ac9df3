"""The engine's batches through its gathering (demo checkpoint, CPU): a batch is released once its decode is queued,
so another thread's batch generates while this one reads its audio back; a readback that fails then fails its own
batch only. Each result still equals its lone render."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from engine.codec import QueuedDecode
from engine.config import GenerationConfig
from engine.request import SpeechRequest

TIMEOUT_S = 60
CFG = GenerationConfig(num_step=3, seed=23)
TEXTS = ("The batch that reads back.", "The batch generated meanwhile.")


class Overlap:
    """Spies on the engine: the first batch's generation waits until the second call waits for its turn, and the
    first batch's readback waits until the second batch's generation has begun (or fails the test, had it to wait
    for the first batch's end), then raises `error` if one is given."""

    def __init__(self, engine, monkeypatch, error: Exception | None = None):
        self.second_waits, self.second_generates = threading.Event(), threading.Event()
        self.events: list[str] = []
        generate, waves = engine._generate_plans, QueuedDecode.waves

        def generating(plans, *args, **kwargs):
            self.events.append(f"generate {plans[0].items[0].text}")
            if len(self.events) == 1:
                assert self.second_waits.wait(TIMEOUT_S)
            else:
                self.second_generates.set()
            return generate(plans, *args, **kwargs)

        def reading(decode):
            if "read" not in self.events:
                self.events.append("read")
                assert self.second_generates.wait(TIMEOUT_S), "the next batch did not start before this readback"
                if error is not None:
                    raise error
            return waves(decode)

        monkeypatch.setattr(engine, "_generate_plans", generating)
        monkeypatch.setattr(QueuedDecode, "waves", reading)

    def run(self, engine, voice):
        """Both calls' futures: the first's batch starts alone, the second asks while it generates."""
        requests = [SpeechRequest(text=text, voice=voice, config=CFG) for text in TEXTS]
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(engine.render_many, requests[:1])
            deadline = time.monotonic() + TIMEOUT_S
            while not self.events:
                assert time.monotonic() < deadline
                time.sleep(0.005)
            second = pool.submit(engine.render_many, requests[1:])
            while not engine._gathering._waiting:
                assert time.monotonic() < deadline
                time.sleep(0.005)
            self.second_waits.set()
            return first.exception(TIMEOUT_S) or first.result(), second.result(TIMEOUT_S)


@pytest.fixture(scope="module")
def alone(engine, voice):
    return [engine.render_many([SpeechRequest(text=text, voice=voice, config=CFG)])[0].audio for text in TEXTS]


def test_the_next_batch_generates_while_the_one_before_reads_its_audio_back(engine, voice, alone, monkeypatch):
    overlap = Overlap(engine, monkeypatch)
    first, second = overlap.run(engine, voice)
    assert overlap.events[0] == f"generate {TEXTS[0]}" and len(overlap.events) == 3  # the readback waited, no more
    np.testing.assert_array_equal(first[0].audio, alone[0])
    np.testing.assert_array_equal(second[0].audio, alone[1])


def test_a_readback_that_fails_after_the_release_fails_its_own_batch_only(engine, voice, alone, monkeypatch):
    overlap = Overlap(engine, monkeypatch, error=ValueError("codes out of range"))
    first, second = overlap.run(engine, voice)
    assert isinstance(first, ValueError)
    np.testing.assert_array_equal(second[0].audio, alone[1])
    assert engine.render_many([SpeechRequest(text=TEXTS[0], voice=voice, config=CFG)])[0].audio.shape == alone[0].shape


def test_streams_started_together_share_their_first_batch(engine, voice, monkeypatch):
    """A stream is a member from its start: one still preparing its text when another's first call finds the device
    idle is waited for, and the two first pieces generate in one batch."""
    import engine.engine as engine_module

    monkeypatch.setattr("engine.gather.GRACE_S", TIMEOUT_S)  # the preparing stream is waited for, however slow
    slow_text, fast_text = "The stream that prepares its text slowly.", "The stream that asks first."
    batches, preparing, prepared = [], threading.Event(), threading.Event()
    generate, require_text = engine._generate_plans, engine_module.require_text

    def generating(plans, *args, **kwargs):
        batches.append(sorted(plan.items[0].text for plan in plans))
        return generate(plans, *args, **kwargs)

    def slow_require_text(text):
        if text == slow_text:
            preparing.set()
            assert prepared.wait(TIMEOUT_S)
        return require_text(text)

    monkeypatch.setattr(engine, "_generate_plans", generating)
    monkeypatch.setattr(engine_module, "require_text", slow_require_text)
    cfg = CFG.replace(normalize_text=False)
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(lambda: list(engine.stream(slow_text, voice, config=cfg)))
        assert preparing.wait(TIMEOUT_S)
        fast = pool.submit(lambda: list(engine.stream(fast_text, voice, config=cfg)))
        deadline = time.monotonic() + TIMEOUT_S
        while not engine._gathering._waiting and not batches:  # the fast call waits, or (the bug) runs alone
            assert time.monotonic() < deadline
            time.sleep(0.005)
        prepared.set()
        assert len(slow.result(TIMEOUT_S)) == 1 and len(fast.result(TIMEOUT_S)) == 1
    assert batches == [sorted([slow_text, fast_text])]
