"""engine/gather.py on its own, with a stand-in for the engine's batch: who shares a batch, in which order, and what
a cancelled call does to the others. Batches are held open by events, so nothing depends on timing."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.errors import Cancelled
from engine.gather import Call, Gathering

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


def _streams_that_stay(gathering: Gathering, leave: threading.Event):
    """A stream: a member that makes one call (its first, of key a) and stays a member, not asking again, until
    `leave` is set; its value."""
    def stream(work):
        with gathering.member():
            value = gathering.run(work, "a")
            assert leave.wait(TIMEOUT_S)
        return value
    return stream


def test_a_starting_stream_goes_first_by_itself_but_not_twice_in_a_row(pool):
    """A member's first call (a stream that starts: its first audio waits for it) runs ahead, alone, of calls
    asked before it; the next starting stream then waits its turn and shares the batch of those calls."""
    batches, leave = Batches(), threading.Event()
    gathering = Gathering(batches)
    stream = _streams_that_stay(gathering, leave)
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


def test_a_starting_stream_goes_first_again_once_the_call_left_waiting_is_cancelled():
    """Not twice in a row ahead of a call that still waits: the plain call a starting batch was taken ahead of is
    stopped while still in line (its thread not yet awake to leave it: which thread runs a batch is not fixed, so the
    line is set up directly), and the next stream to start goes first again."""
    gathering = Gathering(Batches())
    stop = threading.Event()
    plain, first = Call(1, "a", stop, since=1, first=False), Call(11, "a", None, since=2, first=True)
    gathering._waiting = [plain, first]
    with gathering._changed:
        assert gathering._take() == [first] and gathering._started_last  # the plain call has the next batch
        stop.set()
        later = Call(12, "b", None, since=3, first=True)
        gathering._waiting.append(later)
        assert gathering._take() == [later] and not gathering._started_last


def test_streams_starting_together_on_an_idle_device_share_their_first_batch(pool, monkeypatch):
    """A stream whose first call finds the device idle waits for the first call of another stream that has started
    (a member yet to ask) instead of running alone: the two share the first batch."""
    monkeypatch.setattr("engine.gather.GRACE_S", TIMEOUT_S)  # the other's first call is waited for, however late
    batches = Batches()
    gathering = Gathering(batches)
    for work in (1, 2):
        batches.gate(work).set()
    preparing, prepared = threading.Event(), threading.Event()

    def stream(work, ready: threading.Event | None = None):
        with gathering.member():
            if ready is not None:  # still preparing its text when the other asks
                preparing.set()
                assert ready.wait(TIMEOUT_S)
            return gathering.run(work, "a")

    late = pool.submit(stream, 2, prepared)
    assert preparing.wait(TIMEOUT_S)
    early = pool.submit(stream, 1)
    deadline = time.monotonic() + TIMEOUT_S
    while not gathering._waiting and not batches.seen:  # the early call waits, or (the bug) runs alone
        assert time.monotonic() < deadline
        time.sleep(0.005)
    prepared.set()
    assert early.result(TIMEOUT_S) == 10 and late.result(TIMEOUT_S) == 20
    assert batches.seen == [[2, 1]]  # in the order of asking: the late one started first


def test_a_starting_stream_waits_for_a_silent_member_at_most_the_grace(pool, monkeypatch):
    """A started stream that never asks holds a starting batch back for GRACE_S from the batch's first call, no
    longer."""
    monkeypatch.setattr("engine.gather.GRACE_S", 0.05)
    gathering = Gathering(lambda works, cancel: [10 * work for work in works])
    entered, leave = threading.Event(), threading.Event()

    def silent():
        with gathering.member():
            entered.set()
            assert leave.wait(TIMEOUT_S)

    pool.submit(silent)
    assert entered.wait(TIMEOUT_S)
    try:
        with gathering.member():
            assert pool.submit(gathering.run, 1, "a").result(TIMEOUT_S) == 10  # a plain call from another thread
            assert gathering.run(2, "a") == 20  # this stream's first call
    finally:
        leave.set()


class CountedWaits(threading.Condition):
    """The gathering's condition, counting the waits of callers."""

    def __init__(self):
        super().__init__(threading.Lock())
        self.waits = 0

    def wait(self, timeout=None):
        self.waits += 1
        return super().wait(timeout)


class Sleepers(threading.Condition):
    """The gathering's condition, recording which threads have waited on it."""

    def __init__(self):
        super().__init__(threading.Lock())
        self.threads = set()

    def wait(self, timeout=None):
        self.threads.add(threading.get_ident())  # the lock held: its call was looked at, and not let go
        return super().wait(timeout)


def woken_only_when_told(run_batch, monkeypatch) -> Gathering:
    """A gathering of `run_batch` whose waiting calls' threads wake only when it notifies them (no poll) and whose
    condition records who waits (`asleep`): a call cancelled meanwhile stays in line until the next notification."""
    monkeypatch.setattr("engine.gather.POLL_S", TIMEOUT_S)
    gathering = Gathering(run_batch)
    gathering._changed = Sleepers()
    return gathering


def asleep(gathering: Gathering, work) -> None:
    """Until the thread of the waiting call of `work` waits on the gathering's condition (a `Sleepers`): a change that
    does not notify it (its cancel set) is not seen before the gathering next notifies."""
    deadline = time.monotonic() + TIMEOUT_S
    while not any(call.work == work and call.thread in gathering._changed.threads for call in gathering._waiting):
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_lone_stream_never_waits(pool):
    """A stream alone (a member asking one call after another, and a plain call between) starts each batch at
    once: no gather window, no poll."""
    gathering = Gathering(lambda works, cancel: [10 * work for work in works])
    gathering._changed = CountedWaits()

    def stream():
        with gathering.member():
            return [gathering.run(work, "a") for work in range(5)] + [gathering.run(5, "b")]

    assert pool.submit(stream).result(TIMEOUT_S) == [0, 10, 20, 30, 40, 50]
    assert gathering.run(6, "a") == 60
    assert gathering._changed.waits == 0


def test_the_thread_that_ran_the_last_batch_runs_the_next_when_it_waits(pool, monkeypatch):
    """CUDA keeps state per thread: the next batch goes to the thread that ran the last one, even when another
    thread's call completes the batch and could start it itself."""
    monkeypatch.setattr("engine.gather.GRACE_S", TIMEOUT_S)  # a member's next call is waited for, however late
    runners, gate = [], threading.Event()

    def run_batch(works, cancel):
        runners.append((list(works), threading.get_ident()))
        if works == [1]:
            assert gate.wait(TIMEOUT_S)
        return [10 * work for work in works]

    gathering = Gathering(run_batch)
    joined, asked = threading.Event(), threading.Event()

    def first_stream():
        with gathering.member():
            gathering.run(1, "a")
            assert joined.wait(TIMEOUT_S)  # the second stream is a member before this one asks again
            gathering.run(2, "a")
        return threading.get_ident()

    def second_stream():
        with gathering.member():
            joined.set()
            assert asked.wait(TIMEOUT_S)
            gathering.run(3, "a")  # the last call awaited: this thread could start the batch at once

    first = pool.submit(first_stream)
    while not runners:
        time.sleep(0.005)
    second = pool.submit(second_stream)
    assert joined.wait(TIMEOUT_S)
    gate.set()
    waiting(gathering, 1)  # the first stream's next call, waiting for the second's
    asked.set()
    second.result(TIMEOUT_S)
    runner = first.result(TIMEOUT_S)
    assert [works for works, _ in runners] == [[1], [3], [2]]  # the starting stream first, by itself
    assert {thread for _, thread in runners} == {runner}



class Released:
    """run_batch as the engine's: a batch queues its device work until its first work's `queued` gate opens, releases
    itself, then reads its results back until its `read` gate opens; a work's value is ten times it, or the batch
    raises the error set for its first work."""

    def __init__(self):
        self.seen, self.gates, self.errors = [], {}, {}

    def queued(self, work) -> threading.Event:
        return self.gates.setdefault(("queued", work), threading.Event())

    def read(self, work) -> threading.Event:
        return self.gates.setdefault(("read", work), threading.Event())

    def let(self, *works) -> None:
        for work in works:
            self.queued(work).set()
            self.read(work).set()

    def __call__(self, works, batch):
        self.seen.append(list(works))
        assert self.queued(works[0]).wait(TIMEOUT_S)
        batch.release()
        assert self.read(works[0]).wait(TIMEOUT_S)
        if works[0] in self.errors:
            raise self.errors[works[0]]
        return [10 * work for work in works]


def started(batches, count: int) -> None:
    """Until `count` batches have started."""
    deadline = time.monotonic() + TIMEOUT_S
    while len(batches.seen) < count:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_the_next_batch_starts_once_the_one_before_is_released(pool):
    """A call waiting while a batch queues starts its own once that one is released, and a call that comes after the
    release runs at once: both get their values while the first batch still reads its results back."""
    batches = Released()
    gathering = Gathering(batches)
    running = pool.submit(gathering.run, 0, "a")
    started(batches, 1)
    waited = pool.submit(gathering.run, 1, "a")
    waiting(gathering, 1)
    batches.let(1, 2)
    batches.queued(0).set()  # batch 0 is released and reads back until its read gate opens
    assert waited.result(TIMEOUT_S) == 10
    assert pool.submit(gathering.run, 2, "a").result(TIMEOUT_S) == 20
    assert not running.done()
    batches.read(0).set()
    assert running.result(TIMEOUT_S) == 0 and batches.seen == [[0], [1], [2]]


def test_an_error_after_release_reaches_only_its_batch_and_one_batch_queues_at_a_time(pool):
    """A batch that fails while it reads back fails its own calls only; its end does not let a call waiting start a
    batch beside the one queueing meanwhile; the gathering runs on."""
    batches = Released()
    batches.errors[0] = RuntimeError("the readback failed")
    gathering = Gathering(batches)
    batches.queued(0).set()
    failing = pool.submit(gathering.run, 0, "a")
    queueing = pool.submit(gathering.run, 1, "a")  # starts once batch 0 is released, and queues until let
    started(batches, 2)
    later = pool.submit(gathering.run, 2, "a")
    waiting(gathering, 1)
    batches.read(0).set()
    assert isinstance(failing.exception(TIMEOUT_S), RuntimeError)
    with gathering._changed:  # batch 1 still queues: the call after it still waits
        assert gathering._queueing and [call.work for call in gathering._waiting] == [2]
    batches.let(1, 2)
    assert queueing.result(TIMEOUT_S) == 10 and later.result(TIMEOUT_S) == 20
    assert batches.seen == [[0], [1], [2]]


def test_a_call_cancelled_after_its_batch_is_released_gets_cancelled_and_the_others_their_values(pool):
    batches = Released()
    gathering = Gathering(batches)
    running = pool.submit(gathering.run, 9, "a")
    started(batches, 1)
    stop = threading.Event()
    kept, cancelled = pool.submit(gathering.run, 0, "a"), pool.submit(gathering.run, 1, "a", stop)
    waiting(gathering, 2)
    batches.let(9)
    batches.queued(0).set()
    started(batches, 2)
    assert running.result(TIMEOUT_S) == 90
    batches.let(2)
    assert gathering.run(2, "a") == 20  # the next batch ran: batch [0, 1] is released, and reads back
    stop.set()
    batches.read(0).set()
    assert kept.result(TIMEOUT_S) == 0 and isinstance(cancelled.exception(TIMEOUT_S), Cancelled)
    assert batches.seen == [[9], [0, 1], [2]]


def test_after_a_release_a_starting_stream_goes_at_once_and_other_calls_wait_for_the_members_finishing(pool,
                                                                                                  monkeypatch):
    """A stream's first call starts its batch as soon as the batch before is released: no member still finishing
    could join it. A plain call then waits for the next call of the member whose batch is still reading back, and
    shares its batch, as members share theirs instead of taking turns."""
    monkeypatch.setattr("engine.gather.GRACE_S", TIMEOUT_S)  # a member's next call is waited for, however late
    batches = Released()
    gathering = Gathering(batches)
    gathering._changed = CountedWaits()

    def stream(*works):
        with gathering.member():
            return [gathering.run(work, "a") for work in works]

    finishing = pool.submit(stream, 1, 2)
    started(batches, 1)
    starting = pool.submit(stream, 11)
    waiting(gathering, 1)
    plain = pool.submit(gathering.run, 3, "a")
    waiting(gathering, 2)
    batches.let(11, 2)
    batches.queued(1).set()  # batch [1] is released and reads back
    assert starting.result(TIMEOUT_S) == [110]
    waits = gathering._changed.waits
    deadline = time.monotonic() + TIMEOUT_S
    while gathering._changed.waits == waits and len(batches.seen) < 3:  # the plain call looked again, after [11]
        assert time.monotonic() < deadline
        time.sleep(0.005)
    batches.read(1).set()
    batches.let(3)
    assert finishing.result(TIMEOUT_S) == [10, 20] and plain.result(TIMEOUT_S) == 30
    assert batches.seen == [[1], [11], [2, 3]]


def test_a_runner_finishing_a_batch_without_its_own_call_lets_another_thread_run_the_next(pool, monkeypatch):
    """The thread that ran the last batch may take a batch its own call is not in (the oldest call's key is another).
    While it reads that batch back it waits for nothing, so the next batch starts at the release, run by a thread that
    waits, and takes the runner's call along; the runner then waits for that call's batch."""
    monkeypatch.setattr("engine.gather.GRACE_S", TIMEOUT_S)  # a member's next call is waited for, however late
    batches = Released()
    gathering = Gathering(batches)
    batches.let(0, 1)
    ran_first, ask_again, in_member, leave_member = (threading.Event() for _ in range(4))

    def runner():
        first = gathering.run(0, "a")  # this thread runs the last batch
        ran_first.set()
        assert ask_again.wait(TIMEOUT_S)
        return first, gathering.run(1, "a")

    def member():
        with gathering.member():  # a member yet to ask holds every batch until it leaves
            in_member.set()
            assert leave_member.wait(TIMEOUT_S)

    ran = pool.submit(runner)
    assert ran_first.wait(TIMEOUT_S)
    pool.submit(member)
    assert in_member.wait(TIMEOUT_S)
    older = pool.submit(gathering.run, 3, "b")
    waiting(gathering, 1)
    ask_again.set()
    waiting(gathering, 2)
    leave_member.set()  # the runner takes the oldest call's batch, [3], and leaves its own call waiting
    started(batches, 2)
    later = pool.submit(gathering.run, 2, "a")
    waiting(gathering, 2)
    batches.queued(3).set()  # batch [3] is released and reads back until its read gate opens
    try:
        assert later.result(TIMEOUT_S) == 20
    finally:
        batches.read(3).set()
    assert ran.result(TIMEOUT_S) == (0, 10) and older.result(TIMEOUT_S) == 30
    assert batches.seen == [[0], [3], [1, 2]]



def _in_thread(call, *args) -> dict:
    """`call(*args)` on a daemon thread (a call that waits for ever does not hold the tests' end): its answer under
    "value" or "error" once it has one."""
    answer = {}

    def run():
        try:
            answer["value"] = call(*args)
        except Exception as error:
            answer["error"] = error

    threading.Thread(target=run, daemon=True).start()
    return answer


def _answered(answer: dict) -> dict:
    deadline = time.monotonic() + TIMEOUT_S
    while not answer:
        assert time.monotonic() < deadline, "no answer"
        time.sleep(0.005)
    return answer


@pytest.mark.parametrize("answer", [lambda works: [10 * works[0]], lambda works: None], ids=["one value short", "none"])
def test_a_runner_that_answers_no_value_per_call_fails_every_call_of_its_batch_and_the_gathering_runs_on(answer):
    """A runner's wrong answer (a value short, or no list at all) is its batch's error: every call of it gets one, none
    waits for ever, and the next batch runs."""
    gate = threading.Event()

    def run_batch(works, batch):
        if works == [0]:
            assert gate.wait(TIMEOUT_S)
            return [0]
        return answer(works) if works == [1, 2] else [10 * work for work in works]

    gathering = Gathering(run_batch)
    running = _in_thread(gathering.run, 0, "a")
    answers = []
    for count, work in enumerate((1, 2), 1):
        answers.append(_in_thread(gathering.run, work, "a"))
        waiting(gathering, count)
    gate.set()
    assert _answered(running) == {"value": 0}
    for answer in answers:
        assert isinstance(_answered(answer).get("error"), (RuntimeError, TypeError))
    assert _answered(_in_thread(gathering.run, 3, "a")) == {"value": 30}
