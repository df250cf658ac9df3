"""The engine's running batch with the graph runner (its static algorithm on the CPU, demo checkpoint): a stream that
starts while a batch of others runs has its first piece generated first, in a batch of its own, the batch set aside
and then run on exact; and the host keeps at most RUN_AHEAD steps queued ahead of the device (a fake device counts
them). Steps are held by events, so nothing depends on timing."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_gather_engine_joins import CFG, LONG, SHORT, TIMEOUT_S, Held, _asking, _wait_for

from engine.lm import continuous
from engine.lm.run_ahead import RUN_AHEAD
from engine.lm.runner import StaticRunner
from engine.request import SpeechRequest


@pytest.fixture
def one_bucket_engine(engine, monkeypatch):
    """One bucket for both texts: the batch run first loads its layout into the buffers of the batch set aside."""
    monkeypatch.setattr(engine, "runner", StaticRunner(engine.lm, buckets=(512,)))
    return engine


@pytest.fixture
def alone(one_bucket_engine, voice):
    return {text: one_bucket_engine.render_many([SpeechRequest(text=text, voice=voice, config=CFG)])[0].audio
            for text in (LONG, SHORT)}


def test_a_stream_starting_while_a_batch_runs_has_its_first_piece_before_the_batchs_next_step(one_bucket_engine,
                                                                                                voice, alone,
                                                                                                monkeypatch):
    """LONG (a plain call, as a stream's later group) runs; a stream's first piece (SHORT) asked while it is held
    before step 2 runs its six steps in a batch of its own from the boundary after (step 3 of all), and has its
    audio before LONG's step 3; both equal their lone renders."""
    resumed = 3 + CFG.num_step  # LONG's boundary before its step 3, counting every step run
    holds = {2: threading.Event(), resumed: threading.Event()}
    held = Held(monkeypatch, holds)

    def stream():
        with one_bucket_engine.member():
            return one_bucket_engine.render_many([SpeechRequest(text=SHORT, voice=voice, config=CFG)])[0].audio

    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(one_bucket_engine.render_many, [SpeechRequest(text=LONG, voice=voice, config=CFG)])
        held.reached(2)
        starting = pool.submit(stream)
        _wait_for(lambda: _asking(one_bucket_engine, SHORT))
        holds[2].set()
        held.reached(resumed)
        short_audio = starting.result(TIMEOUT_S)  # while the batch is held before LONG's step 3
        assert not running.done()
        holds[resumed].set()
        long_audio = running.result(TIMEOUT_S)[0].audio
    assert held.batches == [1, 1] and held.members == [1] * 2 * CFG.num_step  # it joined no one
    np.testing.assert_array_equal(short_audio, alone[SHORT])
    np.testing.assert_array_equal(long_audio, alone[LONG])


class FakeDevice:
    """StepQueue's stand-in: a step queued stays unfinished until the host waits for it; records how many of a
    batch's steps were unfinished when it queued each."""

    unfinished_at_queue: list[int] = []

    def __init__(self, device):
        self.unfinished = 0

    def queued(self) -> None:
        FakeDevice.unfinished_at_queue.append(self.unfinished)
        self.unfinished += 1

    def catch_up(self, ahead: int = RUN_AHEAD) -> None:
        self.unfinished = min(self.unfinished, ahead)


def test_the_host_queues_a_step_with_at_most_run_ahead_steps_unfinished(one_bucket_engine, voice, monkeypatch):
    monkeypatch.setattr(continuous, "StepQueue", FakeDevice)
    monkeypatch.setattr(FakeDevice, "unfinished_at_queue", [])
    one_bucket_engine.render_many([SpeechRequest(text=SHORT, voice=voice, config=CFG)])
    assert FakeDevice.unfinished_at_queue == [min(step, RUN_AHEAD) for step in range(CFG.num_step)]
