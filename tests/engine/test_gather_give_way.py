"""engine/gather.py: a running batch that is not of starting streams gives way to them at a step boundary
(RunningBatch.give_way): their first calls run as a batch of their own, to its end, before the batch's next step.
Steps are driven by the test one at a time and the order of events is read, so nothing depends on timing."""
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_gather import TIMEOUT_S, asleep, waiting, woken_only_when_told
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


def _stream(gathering: Gathering, work: int, cancel: threading.Event | None = None, key: str = "a"):
    """A stream's first call (a member's first): its first audio waits for it."""
    with gathering.member():
        return gathering.run(work, key, cancel)


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


def _ran_first_at_the_last_boundary(pool, log: GivesWay, gathering: Gathering, plain_key: str, later: list):
    """A batch (a plain call: one step) has taken its step; a plain call of `plain_key` waits for its end and a stream
    starts; at the batch's last boundary the stream runs first and, during its step, the streams `later` (work, key)
    start: they wait for the next batch. The plain call's future."""
    ahead = pool.submit(gathering.run, 10, "a")
    log.tick()
    plain = pool.submit(gathering.run, 11, plain_key)
    waiting(gathering, 1)
    pool.submit(_stream, gathering, 12)
    waiting(gathering, 2)

    def start_later():
        log.after_step = lambda: None
        for count, (work, key) in enumerate(later, 2):
            pool.submit(_stream, gathering, work, None, key)
            waiting(gathering, count)

    log.after_step = start_later
    log.tick()
    assert ahead.result(TIMEOUT_S) == 100
    assert log.events == [("step", [10]), ("done", 10), ("set aside", []), ("step", [12]), ("done", 12)]
    return plain


def test_a_call_left_waiting_when_a_batch_gives_way_has_the_next_batch_not_another_starting_one(pool):
    """Never two starting batches in a row: the plain call (key b) waited for the stream run first, so its batch comes
    next; it gives way at its first boundary to the older of the two streams started meanwhile (keys c, d) and takes
    its step before the younger one runs: it waits for two starting batches, not three."""
    log = GivesWay()
    gathering = Gathering(log)
    plain = _ran_first_at_the_last_boundary(pool, log, gathering, "b", [(13, "c"), (14, "d")])
    log.tick()  # the plain call's batch: the stream of key c first, then its step
    assert log.events[5:] == [("set aside", [11]), ("step", [13]), ("done", 13), ("step", [11]), ("done", 11)]
    log.tick()  # its last boundary: the stream of key d runs first, then it ends
    assert plain.result(TIMEOUT_S) == 110
    assert log.events[10:] == [("set aside", []), ("step", [14]), ("done", 14)]


def test_a_stream_starting_behind_a_call_of_its_key_runs_first_in_its_batch_not_in_it(pool):
    """The plain call's batch comes next, as above; the stream of the same key that started meanwhile does not ride
    that batch (its steps those of big groups): the batch gives way to it at its first boundary."""
    log = GivesWay()
    gathering = Gathering(log)
    plain = _ran_first_at_the_last_boundary(pool, log, gathering, "b", [(23, "b")])
    for _ in range(1 + 1):  # the stream first, then its step; the end
        log.tick()
    assert plain.result(TIMEOUT_S) == 110
    assert log.events[5:] == [("set aside", [11]), ("step", [23]), ("step", [23]), ("done", 23), ("step", [11]),
                              ("done", 11)]


def test_calls_that_join_the_batch_after_it_gives_way_are_not_left_waiting(pool):
    """A plain call of the batch's key waiting at the boundary joins it right after the starting stream ran: no call
    is left in line, so the next batch may again be one of starting streams."""
    log = GivesWay()
    gathering = Gathering(log)
    ahead = pool.submit(gathering.run, 20, "a")
    log.tick()
    joining = pool.submit(gathering.run, 11, "a")
    waiting(gathering, 1)
    starting = pool.submit(_stream, gathering, 12)
    waiting(gathering, 2)
    log.tick()  # the stream runs first, the plain call joins, the batch's step 1
    assert starting.result(TIMEOUT_S) == 120
    assert not gathering._started_last
    log.tick()  # the end
    assert ahead.result(TIMEOUT_S) == 200 and joining.result(TIMEOUT_S) == 110
    assert log.events == [("step", [20]), ("set aside", [20]), ("step", [12]), ("done", 12), ("join", 11),
                          ("step", [20, 11]), ("done", 20), ("done", 11)]


def _to_join_to_run_first_and_left_waiting(pool, log: GivesWay, gathering: Gathering, *, ahead: int,
                                           stop: threading.Event | None = None):
    """A batch (a plain call of work `ahead`, key a) has taken its step 0; then a plain call of key a (40: it may join),
    a stream (10: it runs first at the next boundary) and a plain call of key b (11, left by `stop`: it waits for the
    batch's end) wait, in that order. The futures of the batch's call, of the one of key a and of the one of key b."""
    first = pool.submit(gathering.run, ahead, "a")
    log.tick()  # its step 0
    joined = pool.submit(gathering.run, 40, "a")
    waiting(gathering, 1)
    pool.submit(_stream, gathering, 10)
    waiting(gathering, 2)
    other_key = pool.submit(gathering.run, 11, "b", stop)
    waiting(gathering, 3)
    return first, joined, other_key


def test_a_batch_that_left_calls_waiting_when_it_gave_way_gives_way_no_more(pool):
    """Never two starting batches in a row ahead of a call waiting: the batch gave way to a stream while a plain call of
    another key waited for its end, so once the calls it held then are done it does not give way again (to the streams
    of keys c and d started meanwhile); the plain call's batch comes next and gives way once, to the older of them, and
    the plain call is done before the younger runs: it waits for two starting batches, not three."""
    log = GivesWay()
    gathering = Gathering(log)
    ahead, joined, plain = _to_join_to_run_first_and_left_waiting(pool, log, gathering, ahead=30)
    for _ in range(2):  # the stream first, the plain call of key a joins; steps 1 and 2: the held call is done
        log.tick()
    assert ahead.result(TIMEOUT_S) == 300
    for count, (work, key) in enumerate([(13, "c"), (14, "d")], 2):
        pool.submit(_stream, gathering, work, None, key)
        waiting(gathering, count)
    for _ in range(2 + 1 + 1):  # the joined call's last steps, the end; the plain call's batch: key c's stream first
        log.tick()
    assert log.events == [("step", [30]), ("set aside", [30]), ("step", [10]), ("done", 10), ("join", 40),
                          ("step", [30, 40]), ("step", [30, 40]), ("done", 30), ("step", [40]), ("step", [40]),
                          ("done", 40), ("set aside", [11]), ("step", [13]), ("done", 13), ("step", [11]), ("done", 11)]
    log.tick()  # the plain call's batch's last boundary: the stream of key d runs first, then it ends
    assert log.events[16:] == [("set aside", []), ("step", [14]), ("done", 14)]
    assert joined.result(TIMEOUT_S) == 400 and plain.result(TIMEOUT_S) == 110


def test_a_starting_call_cancelled_while_it_waits_is_not_run_first(pool, monkeypatch):
    """A stream stopped before its first call ran leaves the line; still in line at a boundary (its thread not yet awake
    to leave it), it is not run first: the batch is not set aside for it."""
    log = GivesWay()
    gathering = woken_only_when_told(log, monkeypatch)  # the cancelled call's thread wakes only when told
    ahead = pool.submit(gathering.run, 20, "a")
    log.tick()
    stop = threading.Event()
    left = pool.submit(_stream, gathering, 10, stop)
    asleep(gathering, 10)
    stop.set()
    for _ in range(1 + 1):  # step 1, and the end
        log.tick()
    assert isinstance(left.exception(TIMEOUT_S), Cancelled) and ahead.result(TIMEOUT_S) == 200
    assert log.events == [("step", [20]), ("step", [20]), ("done", 20)]


def test_a_call_cancelled_in_line_does_not_make_the_next_batch_its_own(pool, monkeypatch):
    """When the batch gives way, a plain call of another key that is cancelled (its thread not yet awake to leave the
    line) is not a call left waiting: the next batch may again be one of starting streams."""
    log = GivesWay()
    gathering = woken_only_when_told(log, monkeypatch)  # the cancelled call's thread wakes only when told
    ahead = pool.submit(gathering.run, 20, "a")
    log.tick()
    starting = pool.submit(_stream, gathering, 10)
    waiting(gathering, 1)
    stop = threading.Event()
    left = pool.submit(gathering.run, 11, "b", stop)
    asleep(gathering, 11)
    stop.set()
    log.tick()  # the stream runs first, the batch's step 1
    assert starting.result(TIMEOUT_S) == 100 and isinstance(left.exception(TIMEOUT_S), Cancelled)
    assert not gathering._started_last
    log.tick()  # the end
    assert ahead.result(TIMEOUT_S) == 200



def test_a_batch_gives_way_again_once_the_call_it_left_waiting_is_cancelled(pool):
    """Never two starting batches in a row ahead of a call that still waits: the plain call of key b left in line
    when the batch gave way is stopped while the stream runs first, so once the held call is done the batch gives way
    again, to a stream started meanwhile, instead of making it wait for the batch's end."""
    log = GivesWay()
    gathering = Gathering(log)
    stop = threading.Event()
    ahead, joined, left = _to_join_to_run_first_and_left_waiting(pool, log, gathering, ahead=20, stop=stop)
    log.after_step = stop.set  # during the stream's step
    log.tick()  # the stream first, the plain call of key a joins; step 1: the held call is done
    assert ahead.result(TIMEOUT_S) == 200 and isinstance(left.exception(TIMEOUT_S), Cancelled)
    later = pool.submit(_stream, gathering, 30)
    waiting(gathering, 1)
    log.tick()
    assert later.result(TIMEOUT_S) == 300 and not joined.done()
    for _ in range(2 + 1):  # the joined call's last two steps, and the end
        log.tick()
    assert joined.result(TIMEOUT_S) == 400
    assert log.events == [("step", [20]), ("set aside", [20]), ("step", [10]), ("done", 10), ("join", 40),
                          ("step", [20, 40]), ("done", 20), ("set aside", [40]), ("step", [30]), ("step", [30]),
                          ("step", [30]), ("done", 30), ("step", [40]), ("step", [40]), ("step", [40]), ("done", 40)]
