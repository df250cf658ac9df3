"""Continuous batching across clients (demo checkpoint, CPU, the eager reference loop): generations of
one batch key run side by side on the GPU worker and the engine runs their pieces in shared batches.
Each stream's audio equals its solo run; a request that comes while a long one generates starts in the
next batch (starting streams first, in the order of asking) and then shares the long one's batches; a
request of other settings keeps its place in line; stopping one member leaves the others' results
alone; the shared batches keep to the memory budget."""
import dataclasses
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

import engine.gather as gather
import engine.lm.batch as batch_module
from app import generation
from engine.checks.checker import Checker
from engine.checks.policy import CheckMode, CheckPolicy
from engine.checks.takes import Checks
from engine.checks.voice import SpeakerEncoder
from engine.config import GenerationConfig
from engine.errors import Cancelled

CFG = GenerationConfig(num_step=3, seed=11)
LONG = "\n\n".join(f"Sentence number {n} of the long request." for n in range(1, 7))  # six pieces
MEDIUM = ("A request of four pieces.\n\nIts second piece is a sentence too.\n\nAnd its third one follows it here."
          "\n\nA fourth piece closes the request.")
SHORT = "A short request."
OTHER = "Another short one."
L, M = LONG.split("\n\n"), MEDIUM.split("\n\n")


@pytest.fixture(scope="module")
def solo(engine, voice):
    """Each text's chunks streamed alone, before any test batches anything."""
    return {text: [c.audio for c in engine.stream(text, voice, config=CFG)] for text in (LONG, MEDIUM, SHORT, OTHER)}


class Batches:
    """Records the texts of every batch the engine runs and the sequences of each forward loop inside; the
    batches numbered in `hold` wait until the test lets them go (so that others come while one runs)."""

    def __init__(self, engine, monkeypatch, hold=(0,)):
        self.texts: list[list[str]] = []
        self.forwards: list[list] = []  # the prompts of each eager forward loop
        self.held = {n: threading.Event() for n in hold}
        self.changed = threading.Condition()
        run = engine._generate_batch

        def spied(calls, cancel):
            with self.changed:
                self.texts.append([r.text for call in calls for r in call.requests])
                number = len(self.texts) - 1
                self.changed.notify_all()
            if number in self.held:
                assert self.held[number].wait(60)
            return run(calls, cancel)

        monkeypatch.setattr(engine._gathering, "run_batch", spied)
        generate = batch_module.generate_tokens

        def counted(lm, prompts, *args, **kwargs):
            self.forwards.append(list(prompts))
            return generate(lm, prompts, *args, **kwargs)

        monkeypatch.setattr(batch_module, "generate_tokens", counted)

    def running(self, number: int) -> None:
        """Until batch `number` (0: the first) has come."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.texts) > number, 60), self.texts

    def release(self, number: int) -> None:
        self.held[number].set()


def stream_job(worker, engine, voice, text, owner, config=CFG):
    return worker.submit(lambda cancel: engine.stream(text, voice, config=config, cancel=cancel), owner=owner,
                         lane=owner, batch=engine.batch_key(config))


def audio_of(job, worker) -> list[np.ndarray]:
    return [chunk.audio for kind, chunk in job.follow(worker, poll_s=0.01) if kind == "item"]


def waiting_calls(engine, count: int) -> None:
    """Until `count` calls wait for the next batch."""
    deadline = time.monotonic() + 60
    while len(engine._gathering._waiting) < count:
        assert time.monotonic() < deadline, "the requests did not reach the engine"
        time.sleep(0.01)


def assert_same(streamed: list[np.ndarray], alone: list[np.ndarray]) -> None:
    assert len(streamed) == len(alone)
    for a, b in zip(streamed, alone):
        np.testing.assert_array_equal(a, b)


def long_then_medium(worker, engine, voice, batches) -> tuple[list, list]:
    """A long request generates its first piece; one of four pieces asked meanwhile joins in."""
    long = stream_job(worker, engine, voice, LONG, "client-a")
    batches.running(0)  # the long request's first piece is generating
    medium = stream_job(worker, engine, voice, MEDIUM, "client-b")
    waiting_calls(engine, 1)  # it started beside the long one and waits for the next batch
    assert worker.place(medium) == 0
    batches.release(0)
    return audio_of(long, worker), audio_of(medium, worker)


def test_a_request_joins_the_batches_of_a_long_one_and_each_equals_its_solo_run(engine, voice, solo, worker,
                                                                                monkeypatch):
    batches = Batches(engine, monkeypatch)
    # the long stream is slow to ask for its next groups: the batches wait for it all the same, and its pieces
    # keep their place before the other's, which asked later
    monkeypatch.setattr(gather, "GRACE_S", 600.0)
    render_many = engine.render_many

    def dawdling(requests, cancel=None):
        if requests[0].text in (L[1], L[3]):
            time.sleep(0.3)
        return render_many(requests, cancel)

    monkeypatch.setattr(engine, "render_many", dawdling)
    long_audio, medium_audio = long_then_medium(worker, engine, voice, batches)
    # the first piece alone; then the starting request's first piece (its first audio waits for nothing
    # bigger), then the next groups of both in one batch, in the order they were asked for, one forward loop
    assert batches.texts == [L[:1], M[:1], [*L[1:3], *M[1:3]], [*L[3:], *M[3:]]]
    assert [len(f) for f in batches.forwards] == [1, 1, 4, 4]
    assert_same(long_audio, solo[LONG])
    assert_same(medium_audio, solo[MEDIUM])


def test_requests_asked_while_a_batch_runs_start_next_in_the_order_asked(engine, voice, solo, worker,
                                                                       monkeypatch):
    batches = Batches(engine, monkeypatch)
    long = stream_job(worker, engine, voice, LONG, "client-a")
    batches.running(0)
    later = []
    for n, text in enumerate([SHORT, OTHER]):
        later.append(stream_job(worker, engine, voice, text, f"client-{n}"))
        waiting_calls(engine, n + 1)
    batches.release(0)
    results = [audio_of(job, worker) for job in [long, *later]]
    assert batches.texts[1:3] == [[SHORT, OTHER], L[1:3]]  # the long one waits one batch for them, no more
    for audio, text in zip(results, [LONG, SHORT, OTHER]):
        assert_same(audio, solo[text])


def test_a_request_of_other_settings_keeps_its_place_and_nobody_passes_it(engine, voice, worker, monkeypatch):
    batches = Batches(engine, monkeypatch)
    long = stream_job(worker, engine, voice, LONG, "client-a")
    batches.running(0)
    other_settings = stream_job(worker, engine, voice, SHORT, "client-b", config=CFG.replace(num_step=2))
    compatible = stream_job(worker, engine, voice, OTHER, "client-c")  # could join, but asked later
    time.sleep(0.2)  # the worker had time to start them, had it been going to (the places say it did not)
    assert (worker.place(other_settings), worker.place(compatible)) == (2, 3)
    batches.release(0)
    for job in (long, other_settings, compatible):
        audio_of(job, worker)
    assert long.started_at < other_settings.started_at < compatible.started_at
    assert all(OTHER not in texts for texts in batches.texts if set(texts) & set(L))  # never beside the long one


def test_stopping_one_member_leaves_the_others_as_alone(engine, voice, solo, worker, monkeypatch):
    batches = Batches(engine, monkeypatch, hold=(0, 2))
    long = stream_job(worker, engine, voice, LONG, "client-a")
    batches.running(0)
    short = stream_job(worker, engine, voice, SHORT, "client-b")
    medium = stream_job(worker, engine, voice, MEDIUM, "client-c")
    waiting_calls(engine, 2)
    worker.cancel("client-b")  # Stop while it waits for its batch: it leaves the line at once
    with pytest.raises(Cancelled):
        audio_of(short, worker)
    batches.release(0)
    batches.running(2)  # the long one's next group and the medium one's
    worker.cancel("client-a", abandoned=True)  # the page goes away while its pieces are in the running batch
    batches.release(2)
    with pytest.raises(Cancelled):
        audio_of(long, worker)
    assert_same(audio_of(medium, worker), solo[MEDIUM])  # the batch went on for it, unchanged
    # nothing of the short one, nor of the long one after its stop
    assert batches.texts == [L[:1], M[:1], [*L[1:3], *M[1:3]], M[3:]]


def test_shared_batches_keep_to_the_memory_budget(engine, voice, solo, worker, monkeypatch):
    batches = Batches(engine, monkeypatch)
    long_then_medium(worker, engine, voice, batches)
    shared = batches.forwards[2]  # the long one's two pieces and the medium one's
    budget = dataclasses.replace(engine.budget, bytes=engine.budget.eager_bytes(shared[:2]))  # room for two
    monkeypatch.setattr(engine, "budget", budget)
    batches = Batches(engine, monkeypatch)
    long_audio, medium_audio = long_then_medium(worker, engine, voice, batches)
    assert batches.texts[2] == [*L[1:3], *M[1:3]]  # one shared batch, cut in two forward loops
    assert [len(f) for f in batches.forwards[2:4]] == [2, 2]
    assert all(budget.eager_bytes(f) <= budget.bytes for f in batches.forwards)
    assert_same(long_audio, solo[LONG])
    assert_same(medium_audio, solo[MEDIUM])


def test_checked_generations_share_batches_like_plain_ones(engine, voice, worker, monkeypatch, tiny_speaker_model):
    """Best of 2 for two requests asked while a long plain one generates: both start beside it and their
    candidates go in one batch, each request's chosen take as when it runs alone (its checks take turns)."""
    checker = Checker(None, SpeakerEncoder(tiny_speaker_model), {"words": "not in this test"})
    policy = CheckPolicy(CheckMode.BEST_OF_N, candidates=2)
    alone = {text: list(engine.stream(text, voice, config=CFG, checks=Checks(policy, checker)))
             for text in (SHORT, OTHER)}
    ctx = SimpleNamespace(host=SimpleNamespace(engine=engine), worker=worker,
                          checks=SimpleNamespace(checker=lambda: checker))
    batches = Batches(engine, monkeypatch)
    long = stream_job(worker, engine, voice, LONG, "client-a")
    batches.running(0)
    checked = []
    for n, text in enumerate([SHORT, OTHER]):
        request = generation.GenerationRequest(text, voice, None, None, CFG, "test voice", play_on_speakers=False,
                                               output_device=None)
        checked.append(generation.submit(ctx, request, owner=f"client-{n}", lane=f"client-{n}", policy=policy)[0])
        waiting_calls(engine, n + 1)  # started beside the long one: its candidates wait for the next batch
    batches.release(0)
    audio_of(long, worker)
    assert batches.texts[1] == [SHORT, SHORT, OTHER, OTHER]  # both requests' candidates, one batch
    for job, text in zip(checked, [SHORT, OTHER]):
        chunks = [item[1] for kind, item in job.follow(worker, poll_s=0.01) if kind == "item"]  # (elapsed, chunk)
        assert [(c.seed, c.verdict.rank_key()) for c in chunks] == [(c.seed, c.verdict.rank_key()) for c in alone[text]]
        assert_same([c.audio for c in chunks], [c.audio for c in alone[text]])
