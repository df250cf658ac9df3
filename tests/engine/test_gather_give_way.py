"""engine/gather.py: a running batch that is not of starting streams gives way to them at a step boundary
(RunningBatch.give_way): their first calls run as a batch of their own, to its end, before the batch's next step.
Steps are driven by the test one at a time and the order of events is read, so nothing depends on timing."""
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_gather import TIMEOUT_S, waiting
from test_gather_joins import Steps, Ticked

from engine.errors import Cancelled
from engine.gather import Gathering


class GivesWay(Ticked):
    """run_batch: work w runs w // 10 steps and is worth 10 w. A batch of its own waits for a tick from the test before
    each boundary; there it gives way (logging ("set aside", its works)), takes the joins in (("join", w)), hands a
    cancelled call Cancelled, steps every call left (("step", their works)), hands out the done ones (("done", w)) and,
    once one is done, offers the batch to be handed over. A batch run inside give_way steps without ticks."""

    def __init__(self, set_aside_error: BaseException | None = None, nested_error: BaseException | None = None):
        super().__init__()
        self.events = []
        self.set_aside_error = set_aside_error  # raised by the batch's set_aside
        self.nested_error = nested_error  # raised by a batch run inside give_way after its first step
        self.after_step: Callable[[], None] = lambda: None  # called after each step of a batch run inside give_way

    def set_aside(self, works: list[int], left: dict[int, int]) -> None:
        self.events.append(("set aside", [works[i] for i in left]))
        if self.set_aside_error is not None:
            raise self.set_aside_error

    def __call__(self, works, batch):
        if batch.state is None:  # kept on the batch across hand-overs
            batch.state = list(works), {i: work // 10 for i, work in enumerate(works)}
        works, left = batch.state
        while True:
            if not batch.nested:
                self.wait_for_tick()
            batch.give_way(lambda: self.set_aside(works, left))
            for work in batch.joins():
                left[len(works)] = work // 10
                works.append(work)
                self.events.append(("join", work))
            for i in [i for i in left if batch.cancelled(i)]:
                del left[i]
                batch.hand_out(i, error=Cancelled("Stopped."))
            if not left:
                break
            self.events.append(("step", [works[i] for i in left]))
            done = [i for i in left if left[i] == 1]
            for i in list(left):
                left[i] -= 1
            for i in done:
                del left[i]
                batch.hand_out(i, 10 * works[i])
                self.events.append(("done", works[i]))
            if not batch.nested:
                self.stepped.release()
            else:
                self.after_step()
                if self.nested_error is not None:
                    raise self.nested_error
            if done and batch.hand_over():
                return [None] * len(works)
        if not batch.nested:
            self.stepped.release()
        return [None] * len(works)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(8) as executor:
        yield executor


def _stream(gathering: Gathering, work: int, cancel: threading.Event | None = None):
    """A stream's first call (a member's first): its first audio waits for it."""
    with gathering.member():
        return gathering.run(work, "a", cancel)


def test_a_stream_starting_while_a_batch_runs_gets_its_result_before_that_batchs_next_step(pool):
    """The batch (a plain call: its steps those of a stream's ahead groups) takes its step 0; a stream starts; at the
    next boundary the batch is set aside, the starting stream runs its two steps and has its result, then the batch
    runs its last three steps."""
    log = GivesWay()
    gathering = Gathering(log)
    ahead = pool.submit(gathering.run, 40, "a")
    log.tick()  # its step 0
    starting = pool.submit(_stream, gathering, 20)
    waiting(gathering, 1)
    log.tick()  # the starting stream's batch runs first, then the batch's step 1
    assert starting.result(TIMEOUT_S) == 200 and not ahead.done()
    for _ in range(2 + 1):  # its steps 2 and 3, and the end
        log.tick()
    assert ahead.result(TIMEOUT_S) == 400
    assert log.events == [("step", [40]), ("set aside", [40]), ("step", [20]), ("step", [20]), ("done", 20),
                          ("step", [40]), ("step", [40]), ("step", [40]), ("done", 40)]


def test_streams_starting_together_run_first_as_one_batch_that_is_never_handed_over(pool):
    """Two first calls waiting at the boundary run first, together, in the order asked; once the shorter is done the
    batch stays on the runner's thread (a hand-over would let the batch set aside run beside it)."""
    log = GivesWay()
    gathering = Gathering(log)
    ahead = pool.submit(gathering.run, 30, "a")
    log.tick()
    short = pool.submit(_stream, gathering, 10)
    waiting(gathering, 1)
    longer = pool.submit(_stream, gathering, 20)
    waiting(gathering, 2)
    log.tick()
    assert short.result(TIMEOUT_S) == 100 and longer.result(TIMEOUT_S) == 200
    for _ in range(1 + 1):  # its step 2, and the end
        log.tick()
    assert ahead.result(TIMEOUT_S) == 300
    assert log.events == [("step", [30]), ("set aside", [30]), ("step", [10, 20]), ("done", 10), ("step", [20]),
                          ("done", 20), ("step", [30]), ("step", [30]), ("done", 30)]


def test_a_batch_gives_way_again_only_once_the_calls_it_held_then_are_done(pool):
    """Its calls wait for one batch of starting streams at most: a stream that starts while they still run joins the
    batch, as before; once they are done, the next one to start runs first again."""
    log = GivesWay()
    gathering = Gathering(log)
    held = pool.submit(gathering.run, 30, "a")
    log.tick()
    first = pool.submit(_stream, gathering, 10)
    waiting(gathering, 1)
    log.tick()  # it runs first; then the batch's step 1
    joined = pool.submit(gathering.run, 50, "a")  # a plain call joins (its founder still runs)
    waiting(gathering, 1)
    log.tick()  # it joins; the batch's step 2: the held call is done
    assert held.result(TIMEOUT_S) == 300
    second = pool.submit(_stream, gathering, 20)
    waiting(gathering, 1)
    log.tick()
    assert second.result(TIMEOUT_S) == 200
    for _ in range(3 + 1):  # the joined call's last three steps, and the end
        log.tick()
    assert first.result(TIMEOUT_S) == 100 and joined.result(TIMEOUT_S) == 500
    assert log.events == [("step", [30]), ("set aside", [30]), ("step", [10]), ("done", 10), ("step", [30]),
                          ("join", 50), ("step", [30, 50]), ("done", 30),
                          ("set aside", [50]), ("step", [20]), ("step", [20]), ("done", 20),
                          ("step", [50]), ("step", [50]), ("step", [50]), ("step", [50]), ("done", 50)]


def test_a_stream_starting_while_the_held_calls_run_joins_the_batch_as_before(pool):
    log = GivesWay()
    gathering = Gathering(log)
    held = pool.submit(gathering.run, 40, "a")
    log.tick()
    first = pool.submit(_stream, gathering, 10)
    waiting(gathering, 1)
    log.tick()  # it runs first; then the batch's step 1
    late = pool.submit(_stream, gathering, 20)
    waiting(gathering, 1)
    for _ in range(2 + 1):  # steps 2 and 3 (it joins at 2), and the end
        log.tick()
    assert [f.result(TIMEOUT_S) for f in (held, first, late)] == [400, 100, 200]
    assert log.events[4:] == [("step", [40]), ("join", 20), ("step", [40, 20]), ("step", [40, 20]), ("done", 40),
                              ("done", 20)]


def test_a_runner_that_does_not_give_way_takes_in_no_first_call_while_it_could(pool):
    """RunningBatch.joins: a first call waits for its own batch (its runner would run it first at the boundary); a
    plain call asked after it joins."""
    steps = Steps()
    gathering = Gathering(steps)
    ahead = pool.submit(gathering.run, 30, "a")
    steps.tick()
    starting = pool.submit(_stream, gathering, 10)
    waiting(gathering, 1)
    plain = pool.submit(gathering.run, 20, "a")
    waiting(gathering, 2)
    for _ in range(2 + 1 + 2):  # steps 1 and 2 (the plain call joins at 1) and the end, then the starting one's
        steps.tick()
    assert [f.result(TIMEOUT_S) for f in (ahead, plain, starting)] == [300, 200, 100]
    assert steps.joined == [(1, 20)] and steps.seen == [[30, 20], [10]]


def test_a_set_aside_that_fails_hands_its_error_to_the_starting_calls_too(pool):
    """The starting calls were taken out of the line: they get the error with the batch's own calls, none waits on."""
    log = GivesWay(set_aside_error=RuntimeError("device lost"))
    gathering = Gathering(log)
    ahead = pool.submit(gathering.run, 30, "a")
    log.tick()
    starting = pool.submit(_stream, gathering, 10)
    waiting(gathering, 1)
    assert log.at_boundary.acquire(timeout=TIMEOUT_S)
    log.ticks.release()  # the batch ends with the error: no step to wait for
    for call in (starting, ahead):
        with pytest.raises(RuntimeError, match="device lost"):
            call.result(TIMEOUT_S)
    assert not gathering._in_batches and not gathering._waiting


def test_a_batch_run_first_that_fails_hands_its_calls_the_error_and_the_batch_set_aside_runs_on(pool):
    log = GivesWay(nested_error=RuntimeError("out of memory"))
    gathering = Gathering(log)
    ahead = pool.submit(gathering.run, 30, "a")
    log.tick()
    starting = pool.submit(_stream, gathering, 20)
    waiting(gathering, 1)
    log.tick()  # the starting stream's batch fails after its first step; then the batch's step 1
    with pytest.raises(RuntimeError, match="out of memory"):
        starting.result(TIMEOUT_S)
    for _ in range(1 + 1):  # its step 2, and the end
        log.tick()
    assert ahead.result(TIMEOUT_S) == 300
    assert log.events == [("step", [30]), ("set aside", [30]), ("step", [20]), ("step", [30]), ("step", [30]),
                          ("done", 30)]


def test_a_starting_call_cancelled_inside_the_batch_run_first_leaves_it_the_others_untouched(pool):
    log = GivesWay()
    gathering = Gathering(log)
    ahead = pool.submit(gathering.run, 30, "a")
    log.tick()
    cancel = threading.Event()
    left = pool.submit(_stream, gathering, 30, cancel)
    waiting(gathering, 1)
    stays = pool.submit(_stream, gathering, 20)
    waiting(gathering, 2)
    log.after_step = cancel.set  # after the starting batch's first step
    log.tick()
    with pytest.raises(Cancelled):
        left.result(TIMEOUT_S)
    assert stays.result(TIMEOUT_S) == 200 and not ahead.done()
    for _ in range(1 + 1):
        log.tick()
    assert ahead.result(TIMEOUT_S) == 300
    assert log.events == [("step", [30]), ("set aside", [30]), ("step", [30, 20]), ("step", [20]), ("done", 20),
                          ("step", [30]), ("step", [30]), ("done", 30)]
