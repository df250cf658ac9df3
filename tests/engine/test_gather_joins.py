"""engine/gather.py with a runner that takes calls in at step boundaries (RunningBatch.joins) and hands each call
its result as soon as it is done (hand_out), as the engine's graph runner does: who joins, in which order, and when
a call gets its value. Steps are driven by the test one at a time, so nothing depends on timing."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_gather import TIMEOUT_S, asleep, waiting, woken_only_when_told

from engine.errors import Cancelled
from engine.gather import Gathering


class Ticked:
    """A run_batch the test drives one step at a time: the batch waits at each step boundary for a tick
    (`wait_for_tick`) and says when it has taken its step or ended (`stepped.release()`); `tick` is the test's side."""

    def __init__(self):
        self.ticks, self.at_boundary, self.stepped = (threading.Semaphore(0) for _ in range(3))

    def tick(self) -> None:
        """Let the running batch take one step (or end) once it waits for it, and wait for it to have done so."""
        assert self.at_boundary.acquire(timeout=TIMEOUT_S)
        self.ticks.release()
        assert self.stepped.acquire(timeout=TIMEOUT_S)

    def wait_for_tick(self) -> None:
        self.at_boundary.release()
        assert self.ticks.acquire(timeout=TIMEOUT_S)


class Steps(Ticked):
    """run_batch: work w runs w // 10 steps and is worth 10 w. Before each step it waits for a tick from the test,
    then takes the joins in, hands a cancelled call Cancelled, and steps every call left."""

    def __init__(self, hands_over: bool = False):
        super().__init__()
        self.seen, self.joined, self.finished, self.threads = [], [], [], []
        self.hands_over = hands_over  # once its own call is done, the runner hands the batch over

    def __call__(self, works, batch):
        if batch.state is None:  # kept on the batch across hand-overs
            batch.state = {"works": list(works), "left": {i: work // 10 for i, work in enumerate(works)}, "step": 0}
        state = batch.state
        works, left = state["works"], state["left"]
        while True:
            self.wait_for_tick()
            self.threads.append(threading.get_ident())
            for work in batch.joins():
                left[len(works)] = work // 10
                works.append(work)
                self.joined.append((state["step"], work))
            for i in [i for i in left if batch.cancelled(i)]:
                del left[i]
                batch.hand_out(i, error=Cancelled("Stopped."))
            if not left:
                self.stepped.release()
                break
            done = [i for i in left if left[i] == 1]
            for i in list(left):
                left[i] -= 1
                if not left[i]:
                    del left[i]
                    self.finished.append((state["step"], works[i]))
                    batch.hand_out(i, 10 * works[i])
            state["step"] += 1
            self.stepped.release()
            if self.hands_over and done and batch.hand_over():
                return [None] * len(works)
        self.seen.append(works)
        return [None] * len(works)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(8) as executor:
        yield executor


def test_calls_of_the_batchs_key_join_at_the_next_step_and_leave_with_their_results(pool):
    """A call asked while a batch of its key runs joins it at the next step boundary and gets its value when its
    own steps are done, the batch running on; a call asked after one of another key waits behind that one."""
    steps = Steps()
    gathering = Gathering(steps)
    first = pool.submit(gathering.run, 30, "a")  # 3 steps
    steps.tick()  # its step 0
    short = pool.submit(gathering.run, 10, "a")
    waiting(gathering, 1)
    other = pool.submit(gathering.run, 10, "b")
    waiting(gathering, 2)
    behind = pool.submit(gathering.run, 20, "a")
    waiting(gathering, 3)
    steps.tick()  # step 1: the short one joins and finishes at it
    assert short.result(TIMEOUT_S) == 100
    assert not first.done() and [call.work for call in gathering._waiting] == [10, 20]
    for _ in range(2 + 2 + 3):  # the first batch's steps 2 and its end, then b's batch, then the last
        steps.tick()
    assert first.result(TIMEOUT_S) == 300 and other.result(TIMEOUT_S) == 100 and behind.result(TIMEOUT_S) == 200
    assert steps.joined == [(1, 10)] and steps.seen == [[30, 10], [10], [20]]


def test_a_batch_takes_no_joins_once_the_calls_it_started_with_are_done(pool):
    """Joins stop when its founders are done, so it ends at most one generation after them: a call asked then waits
    for the next batch, not for the joined ones' joiners, and so on."""
    steps = Steps()
    gathering = Gathering(steps)
    first = pool.submit(gathering.run, 20, "a")  # 2 steps: done at step 1
    steps.tick()
    joined = pool.submit(gathering.run, 30, "a")
    waiting(gathering, 1)
    steps.tick()  # step 1: joined takes its step 0, first is done
    late = pool.submit(gathering.run, 10, "a")
    waiting(gathering, 1)
    for _ in range(3 + 2):  # steps 2 and 3 and the end, then the late one's batch
        steps.tick()
    assert [f.result(TIMEOUT_S) for f in (first, joined, late)] == [200, 300, 100]
    assert steps.seen == [[20, 30], [10]]


def test_a_joined_call_cancelled_leaves_at_the_next_boundary_and_the_others_run_on(pool):
    steps = Steps()
    gathering = Gathering(steps)
    first = pool.submit(gathering.run, 30, "a")
    steps.tick()
    stop = threading.Event()
    leaving = pool.submit(gathering.run, 30, "a", stop)
    waiting(gathering, 1)
    steps.tick()  # step 1: it joins
    stop.set()
    steps.tick()  # step 2: it leaves, the first is done
    assert isinstance(leaving.exception(TIMEOUT_S), Cancelled)
    steps.tick()
    assert first.result(TIMEOUT_S) == 300 and steps.finished == [(2, 30)] and steps.seen == [[30, 30]]


def test_a_batch_of_starting_streams_takes_in_only_starting_streams(pool):
    """Its steps stay as short as they can be for the first audio waiting on them: another stream's start joins it,
    a call asked before that start does not (it runs next)."""
    steps = Steps()
    gathering = Gathering(steps)

    def stream(work):
        with gathering.member():
            return gathering.run(work, "a")

    first = pool.submit(stream, 30)
    steps.tick()
    plain = pool.submit(gathering.run, 10, "a")
    waiting(gathering, 1)
    second = pool.submit(stream, 20)
    waiting(gathering, 2)
    for _ in range(3 + 2):  # steps 1 and 2 and the end, then the plain call's batch
        steps.tick()
    assert [f.result(TIMEOUT_S) for f in (first, second, plain)] == [300, 200, 100]
    assert steps.joined == [(1, 20)] and steps.seen == [[30, 20], [10]]


def test_a_runner_whose_call_is_done_hands_the_batch_over_to_a_joined_calls_thread(pool):
    """The runner's own caller goes on as soon as its call is done, as every other's does: a thread whose call is
    still in the batch runs it on from the next boundary."""
    steps = Steps(hands_over=True)
    gathering = Gathering(steps)
    first = pool.submit(gathering.run, 30, "a")  # its thread runs the batch
    steps.tick()
    joined = pool.submit(gathering.run, 50, "a")
    waiting(gathering, 1)
    steps.tick()  # step 1: it joins
    steps.tick()  # step 2: the first is done
    assert first.result(TIMEOUT_S) == 300 and not joined.done()
    for _ in range(3 + 1):  # its steps 3 to 5, and the end
        steps.tick()
    assert joined.result(TIMEOUT_S) == 500 and steps.seen == [[30, 50]]
    before, after = set(steps.threads[:3]), set(steps.threads[3:])  # the first's thread, then the joined one's
    assert len(before) == len(after) == 1 and before != after


class TakenOverFirst(Steps):
    """Steps whose runner, once it has handed the batch over, returns only after the thread it handed it to has
    taken it: the order the scheduler may pick, made certain."""

    def __call__(self, works, batch):
        values = super().__call__(works, batch)
        if batch.gathering._parked is batch:
            deadline = time.monotonic() + TIMEOUT_S
            while batch.gathering._parked is batch:
                assert time.monotonic() < deadline
                time.sleep(0.001)
        return values


def test_a_runner_returning_after_its_batch_was_taken_over_leaves_the_other_calls_running(pool):
    """The runner that handed its batch over ends its part without settling the calls still in it, however late it
    gets there: the thread that took the batch over may already run it."""
    steps = TakenOverFirst(hands_over=True)
    gathering = Gathering(steps)
    first = pool.submit(gathering.run, 30, "a")
    steps.tick()
    joined = pool.submit(gathering.run, 50, "a")
    waiting(gathering, 1)
    steps.tick()  # step 1: it joins
    steps.tick()  # step 2: the first is done; the batch is handed over
    assert first.result(TIMEOUT_S) == 300
    for _ in range(3 + 1):  # the joined call's steps 3 to 5, and the end
        steps.tick()
    assert joined.result(TIMEOUT_S) == 500


def test_a_call_cancelled_while_it_waits_is_not_taken_in(pool, monkeypatch):
    """A call whose caller left while it waits is left out of the joins even while it is still in line (its thread not
    yet awake to leave it): it gets Cancelled without joining."""
    steps = Steps()
    gathering = woken_only_when_told(steps, monkeypatch)  # the cancelled call's thread wakes only when told
    first = pool.submit(gathering.run, 20, "a")
    steps.tick()
    stop = threading.Event()
    left = pool.submit(gathering.run, 10, "a", stop)
    asleep(gathering, 10)
    stop.set()
    for _ in range(1 + 1):  # step 1, and the end
        steps.tick()
    assert isinstance(left.exception(TIMEOUT_S), Cancelled) and first.result(TIMEOUT_S) == 200
    assert steps.joined == [] and steps.seen == [[20]]


def test_a_runner_whose_own_call_is_not_done_keeps_the_batch_when_a_joined_call_is(pool):
    """A call that joined and is done first does not make the runner hand the batch over: its own call still runs, so
    it runs the batch on (CUDA's state is per thread)."""
    steps = Steps(hands_over=True)
    batches = []
    gathering = Gathering(lambda works, batch: batches.append(batch) or steps(works, batch))
    first = pool.submit(gathering.run, 30, "a")
    steps.tick()
    joined = pool.submit(gathering.run, 10, "a")
    waiting(gathering, 1)
    steps.tick()  # step 1: it joins and is done
    assert joined.result(TIMEOUT_S) == 100
    for _ in range(1 + 1):  # step 2, and the end
        steps.tick()
    assert first.result(TIMEOUT_S) == 300
    assert [batch.handovers for batch in batches] == [0] and len(set(steps.threads)) == 1
