"""The engine's running batch through its gathering with the graph runner (its static algorithm on the CPU, demo
checkpoint): a call asked while a batch generates joins it at a step boundary, gets its audio as soon as its own
steps are done, and equals its lone render, as does the call it joined; a joined call stopped leaves the others
exact. Steps are held by events, so nothing depends on timing."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import engine.lm.batch as batch_module
from engine.config import GenerationConfig
from engine.errors import Cancelled
from engine.gather import RunningBatch
from engine.lm.decode import EagerGeneration
from engine.lm.runner import StaticRunner
from engine.request import SpeechRequest

TIMEOUT_S = 60
CFG = GenerationConfig(num_step=6, seed=31)
LONG, SHORT = "This first request is the longer of the two, by a good many words.", "A short one."


@pytest.fixture
def runner_engine(engine, monkeypatch):
    monkeypatch.setattr(engine, "runner", StaticRunner(engine.lm, buckets=(256, 512, 1024)))
    return engine


@pytest.fixture
def alone(runner_engine, voice):
    return {text: runner_engine.render_many([SpeechRequest(text=text, voice=voice, config=CFG)])[0].audio
            for text in (LONG, SHORT)}


class Held:
    """Spies on the running batches: at the boundary before step i (the batch's own count, before the joins there are
    taken; outside the engine's lock, as a caller's decode needs it) the runner waits for holds[i] when there is one,
    after saying so (`reached(i)`). Records how many batches were made, which sequences each took in, and how many
    members each step ran."""

    def __init__(self, monkeypatch, holds: dict[int, threading.Event]):
        self.batches: list[int] = []
        self.members: list[int] = []
        self._reached = {i: threading.Event() for i in holds}
        held, joins = self, RunningBatch.joins

        class Spied(batch_module.ContinuousBatch):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                held.batches.append(0)

            def add(self, *args):
                held.batches[-1] += 1
                return super().add(*args)

            def step(self):
                finished = super().step()
                held.members.append(len(self.members))
                return finished

        def boundary(batch):
            step = len(held.members)  # steps taken so far (one batch in these tests)
            if step in holds:
                held._reached[step].set()
                assert holds[step].wait(TIMEOUT_S)
            return joins(batch)

        monkeypatch.setattr(batch_module, "ContinuousBatch", Spied)
        monkeypatch.setattr(RunningBatch, "joins", boundary)

    def reached(self, step: int) -> None:
        """Until the batch waits before step `step`, its joins there not yet taken."""
        assert self._reached[step].wait(TIMEOUT_S)


def _wait_for(condition) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def _asking(engine, text: str) -> bool:
    return any(call.work.requests[0].text == text for call in engine._gathering._waiting)


def test_calls_join_the_running_batch_and_each_gets_its_audio_when_its_own_steps_are_done(runner_engine, voice,
                                                                                           alone, monkeypatch):
    """Two calls join a running batch at steps 1 and 2: the first of them, and the call the batch started with, have
    their audio while the batch is held before the other's last step; all three equal their lone renders."""
    last = 2 + CFG.num_step - 1  # the second one's last step
    holds = {1: threading.Event(), 2: threading.Event(), last: threading.Event()}
    held = Held(monkeypatch, holds)
    with ThreadPoolExecutor(3) as pool:
        running = pool.submit(runner_engine.render_many, [SpeechRequest(text=LONG, voice=voice, config=CFG)])
        joining = []
        for step, text in ((1, SHORT), (2, LONG)):
            held.reached(step)
            joining.append(pool.submit(runner_engine.render_many, [SpeechRequest(text=text, voice=voice, config=CFG)]))
            _wait_for(lambda: _asking(runner_engine, text))
            holds[step].set()  # it joins at this boundary
        # the first joiner and the call the batch started with have their audio (its runner handed the batch over)
        first_audio, running_audio = (future.result(TIMEOUT_S)[0].audio for future in (joining[0], running))
        assert not joining[1].done()
        holds[last].set()
        audio = [running_audio, joining[1].result(TIMEOUT_S)[0].audio]
    assert held.batches == [3] and held.members == [1, 2, 3, 3, 3, 3, 2, 1]  # one running batch took all three
    np.testing.assert_array_equal(first_audio, alone[SHORT])
    for got in audio:
        np.testing.assert_array_equal(got, alone[LONG])


def test_a_joined_call_stopped_leaves_at_the_next_boundary_and_the_other_stays_exact(runner_engine, voice, alone,
                                                                                    monkeypatch):
    holds = {step: threading.Event() for step in (1, 2, 3)}
    held = Held(monkeypatch, holds)
    stop = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        long = pool.submit(runner_engine.render_many, [SpeechRequest(text=LONG, voice=voice, config=CFG)])
        held.reached(1)
        short = pool.submit(runner_engine.render_many, [SpeechRequest(text=SHORT, voice=voice, config=CFG)], stop)
        _wait_for(lambda: _asking(runner_engine, SHORT))
        holds[1].set()  # it joins at step 1
        held.reached(2)
        stop.set()
        holds[2].set()
        assert isinstance(short.exception(TIMEOUT_S), Cancelled)  # at the boundary before step 2
        holds[3].set()
        long_audio = long.result(TIMEOUT_S)[0].audio
    assert held.batches == [2] and held.members[:4] == [1, 2, 1, 1]  # it ran step 1 only
    np.testing.assert_array_equal(long_audio, alone[LONG])


def test_streams_of_several_clients_at_once_each_equal_their_lone_renders(runner_engine, voice):
    """However their pieces meet in running batches (joins, hand-overs, members waited for), every chunk of every
    stream is its lone render and every stream ends."""
    text = "First words here.\n\nThe second sentence.\n\nAnd the third is last."
    cfg = CFG.replace(num_step=3, normalize_text=False)
    with ThreadPoolExecutor(3) as pool:
        streams = list(pool.map(lambda k: list(runner_engine.stream(text, voice, config=cfg.replace(seed=10 * k))),
                                range(3)))
    for k, chunks in enumerate(streams):
        assert [chunk.index for chunk in chunks] == [0, 1, 2]
        for chunk in chunks:
            alone = runner_engine.synthesize(chunk.text, voice, config=cfg.replace(seed=10 * k + chunk.index))
            np.testing.assert_array_equal(chunk.audio, alone.audio)


def _stop_the_first_call_while_a_second_joins(runner_engine, voice, monkeypatch) -> tuple[Held, np.ndarray]:
    """LONG runs; SHORT joins its batch at step 1; LONG's Stop is set while the batch is held before step 2, and its
    caller must have Cancelled before the batch may go on to step 3. Returns the batch's record and SHORT's audio."""
    holds = {step: threading.Event() for step in (1, 2, 3)}
    held = Held(monkeypatch, holds)
    stop = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        long = pool.submit(runner_engine.render_many, [SpeechRequest(text=LONG, voice=voice, config=CFG)], stop)
        held.reached(1)
        short = pool.submit(runner_engine.render_many, [SpeechRequest(text=SHORT, voice=voice, config=CFG)])
        _wait_for(lambda: _asking(runner_engine, SHORT))
        holds[1].set()  # it joins at step 1
        held.reached(2)
        stop.set()
        holds[2].set()
        assert isinstance(long.exception(TIMEOUT_S), Cancelled)  # while the batch is held before step 3
        holds[3].set()
        return held, short.result(TIMEOUT_S)[0].audio


def test_the_runners_own_call_stopped_returns_at_the_next_boundary_while_a_joined_call_runs_on(runner_engine, voice,
                                                                                              alone, monkeypatch):
    """The thread running the batch, its own call stopped, hands the batch over there and its caller goes on at
    once, not once a call that joined has its audio; the joined call stays exact."""
    held, short_audio = _stop_the_first_call_while_a_second_joins(runner_engine, voice, monkeypatch)
    assert held.batches == [2] and held.members[:3] == [1, 2, 1]  # the stopped call ran steps 0 and 1 only
    np.testing.assert_array_equal(short_audio, alone[SHORT])


def test_a_call_too_large_for_every_bucket_steps_beside_the_batch_and_is_stopped_at_a_boundary(runner_engine, voice,
                                                                                              alone, monkeypatch):
    """The memory budget left the runner no bucket that holds the first call (engine/lm/batch.py runs it eagerly beside
    the batch): it takes one step at each of the batch's, so stopped at the boundary before step 2 its caller gets
    Cancelled there after two steps, and the call that joined at step 1 keeps its lone audio."""
    monkeypatch.setattr(runner_engine, "runner", StaticRunner(runner_engine.lm, buckets=(256,)))  # LONG: 331 rows
    steps, step = [], EagerGeneration.step
    monkeypatch.setattr(EagerGeneration, "step", lambda self: steps.append(self.done) or step(self))
    held, short_audio = _stop_the_first_call_while_a_second_joins(runner_engine, voice, monkeypatch)
    assert steps == [0, 1] and held.members[:3] == [0, 1, 1]  # beside the batch: never one of its members
    np.testing.assert_array_equal(short_audio, alone[SHORT])
