"""engine/gather.py on its own, with a stand-in for the engine's batch: who shares a batch, in which order, and what
a cancelled call does to the others. Batches are held open by events, so nothing depends on timing."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.errors import Cancelled
from engine.gather import Gathering

TIMEOUT_S = 60


class Batches:
    """run_batch: records each batch's works, holds it until its first work's gate opens, and records whether the
    batch's cancel said stop; a work's value is ten times it."""

    def __init__(self):
        self.seen, self.stopped, self.gates = [], [], {}

    def gate(self, work) -> threading.Event:
        return self.gates.setdefault(work, threading.Event())

    def __call__(self, works, cancel):
        self.seen.append(list(works))
        assert self.gate(works[0]).wait(TIMEOUT_S)
        self.stopped.append(cancel.is_set())
        return [10 * work for work in works]


def waiting(gathering: Gathering, count: int) -> None:
    """Until `count` calls wait for the next batch."""
    deadline = time.monotonic() + TIMEOUT_S
    while len(gathering._waiting) < count:
        assert time.monotonic() < deadline
        time.sleep(0.005)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(8) as executor:
        yield executor


def test_the_next_batch_is_the_oldest_calls_key_in_the_order_asked(pool):
    batches = Batches()
    gathering = Gathering(batches)
    running = pool.submit(gathering.run, 0, "a")
    while not batches.seen:
        time.sleep(0.005)
    futures = []
    for count, (work, key) in enumerate([(1, "a"), (2, "b"), (3, "a")], 1):
        futures.append(pool.submit(gathering.run, work, key))
        waiting(gathering, count)
    for work in (0, 1, 2):
        batches.gate(work).set()
    assert running.result(TIMEOUT_S) == 0 and [f.result(TIMEOUT_S) for f in futures] == [10, 20, 30]
    assert batches.seen == [[0], [1, 3], [2]]


def test_a_cancelled_call_stops_only_itself(pool):
    """Cancelled while it waits, a call leaves the line at once; cancelled inside a batch, it gets Cancelled and
    the others of that batch their results, the batch not stopped for them."""
    batches = Batches()
    gathering = Gathering(batches)
    running = pool.submit(gathering.run, 0, "a")
    while not batches.seen:
        time.sleep(0.005)
    leaving, staying, stop = threading.Event(), threading.Event(), threading.Event()
    left = pool.submit(gathering.run, 1, "a", leaving)
    waiting(gathering, 1)
    leaving.set()
    assert isinstance(left.exception(TIMEOUT_S), Cancelled)  # while the batch before it still runs
    cancelled = pool.submit(gathering.run, 2, "a", stop)
    waiting(gathering, 1)
    kept = pool.submit(gathering.run, 3, "a", staying)
    waiting(gathering, 2)
    batches.gate(0).set()
    assert running.result(TIMEOUT_S) == 0
    while len(batches.seen) < 2:
        time.sleep(0.005)
    stop.set()  # inside the batch [2, 3]
    batches.gate(2).set()
    assert isinstance(cancelled.exception(TIMEOUT_S), Cancelled) and kept.result(TIMEOUT_S) == 30
    assert batches.seen == [[0], [2, 3]] and batches.stopped == [False, False]


def test_a_starting_stream_goes_first_by_itself_but_not_twice_in_a_row(pool):
    """A member's first call (a stream that starts: its first audio waits for it) runs ahead, alone, of calls
    asked before it; the next starting stream then waits its turn and shares the batch of those calls."""
    batches, leave = Batches(), threading.Event()
    gathering = Gathering(batches)

    def stream(work):
        with gathering.member():
            value = gathering.run(work, "a")
            assert leave.wait(TIMEOUT_S)  # still a member, not asking again yet
        return value

    running = pool.submit(gathering.run, 0, "a")
    while not batches.seen:
        time.sleep(0.005)
    alone = pool.submit(gathering.run, 1, "a")
    waiting(gathering, 1)
    first = pool.submit(stream, 11)
    waiting(gathering, 2)
    batches.gate(0).set()
    while len(batches.seen) < 2:
        time.sleep(0.005)
    second = pool.submit(stream, 12)
    waiting(gathering, 2)
    for work in (11, 1):
        batches.gate(work).set()
    assert running.result(TIMEOUT_S) == 0 and alone.result(TIMEOUT_S) == 10
    leave.set()
    assert first.result(TIMEOUT_S) == 110 and second.result(TIMEOUT_S) == 120
    assert batches.seen == [[0], [11], [1, 12]]
