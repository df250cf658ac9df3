"""Calls made at the same time from several threads, run together: continuous batching across callers.

The app's GPU worker runs compatible jobs (two API clients, the Studio and a Clone request) side by side, each on its
own thread; every generation they ask for comes here. One batch is queued on the device at a time: once the batch before
has queued all its device work (its runner calls `RunningBatch.release`, or returns: the engine's callers decode their
own tokens after), the next batch is every call waiting then whose key equals the oldest's, in the order they were asked
for. Its generation queues beside the other's decode, so the device works on while that audio is read back. A call that
comes while a batch is queued joins the next one (or this one, below), so none waits more than one batch behind another,
however long that one is. Streams that are starting go first, by themselves (one such batch at a time, and never two
in a row ahead of other calls waiting: theirs is next): their first audio does not wait for the big groups of streams
already playing.

One of the waiting threads runs the batch: the one that ran the last batch when it waits too, since CUDA keeps state
per thread (cuBLAS and cuDNN handles, cuDNN's convolution plans for each shape) that a thread's first batches would
have to make; the others wait for their results. A runner still finishing its batch does not wait, so another
thread runs the next: waiting for it would idle the device for the whole readback, which costs more than a thread's
state, made once (and once per new shape). A call that finds nothing running and nobody to wait for runs at once.

A runner that steps its batch (the engine's graph runner, engine/lm/continuous.py) takes calls in at step boundaries
(`RunningBatch.joins`): the calls waiting with its key, in the order of asking, up to the first one waiting with another
key (order kept: none overtakes an older call; a batch of starting streams takes only starting streams, and a batch that
may give way to them, below, takes none of them), while a call the batch started with is still running (so a batch ends
at most one generation after its founders, and a call of another key waits for at most that). Each call gets its result
as soon as its own steps are done (`hand_out`): a stream that starts while a batch runs has its first audio one
generation after the next step boundary, not after the whole batch and its own. A batch that is not of starting streams
gives way to them (`RunningBatch.give_way`): when a stream's first call waits at a boundary, its runner sets its own
state aside and runs the starting streams first, as a batch of their own on its thread to its end (counted as one taken:
the calls it leaves in line have the next batch), then goes on; a first call does not join such a batch while it could
give way to it, nor start one with such a runner (its steps are those of big groups, tens of ms each: the first audio
would wait for 32 of them, while the streams already playing have seconds of audio ahead of their playback). It gives
way again only once the calls it held then are done, so none of them waits for more than one such batch, and only if it
left no call in line then that still waits (that call's batch is next, and it may give way once in turn). Once
the runner's own call is done (or if it has none in the batch), it hands the batch over to a thread whose call is still
in it (`hand_over`), which runs it on from the next boundary: no caller waits for others' steps after its own. A call
cancelled inside such a batch leaves it at the next boundary, the others' tokens untouched.

A thread that asks for one generation after another (a stream's pieces) is a `member` while it does: the next batch
starts once the next call of every member that could join it is there, so that the members share their batches
instead of taking turns. A member whose call is in a batch still finishing is waited for until that batch has
handed out its results and the member has completed its own (`completing`: the engine decodes its audio on the
caller's thread); a member that dawdles, GRACE_S after that. A batch of starting streams waits
only for members yet to make their first call (no other could join it), and GRACE_S after the later of the last
batch's end and its oldest call's arrival: streams that start together share their first batch on an idle device too,
instead of one running alone and the rest waiting for it (a stream is a member from its start, before its text is
prepared, so the others' first calls are awaited). A thread's call in a batch never runs
another batch. A call left by its caller (its `cancel` set) while it waits leaves at once; inside a batch it stops
the batch only when every call in it is cancelled (and before the batch is released), and otherwise its result is
dropped: the others' tokens are those of a solo run.
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.errors import Cancelled

POLL_S = 0.05  # how often a waiting call looks at its own cancel event
GRACE_S = 0.02  # how long a batch waits for a member's next call at most (its thread does other work)


@dataclass(eq=False)
class Call:
    work: Any  # what the batch runner gets for this call
    key: Hashable  # calls of equal keys may share a batch
    cancel: threading.Event | None
    since: int  # the caller's place in the order of asking (a member's: when it became one)
    first: bool  # a member's first call: the start of a stream, whose first audio waits for it
    thread: int = field(default_factory=threading.get_ident)
    asked_at: float = field(default_factory=time.monotonic)
    done: bool = False
    value: Any = None
    error: BaseException | None = None

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()


@dataclass
class Member:
    blocks: int  # `member` blocks the thread is in
    since: int  # its place in the order of asking
    calls: int = 0  # calls it has made


@dataclass(eq=False)
class RunningBatch:
    """What `run_batch` gets beside the works: the batch's own cancel event, as the engine reads it (set once every
    call is cancelled), `release` to say that its device work is all queued, and for a runner that takes calls in at
    step boundaries, `joins` and `hand_out`."""

    calls: list[Call]
    gathering: Gathering
    released: bool = False  # the next batch may start (set under the gathering's lock)
    founders: int = 0  # calls it started with (the first of `calls`)
    handovers: int = 0  # times its runner handed it over (`hand_over`), counted by the runner of the moment
    state: Any = None  # the runner's, kept across hand-overs
    nested: bool = False  # run inside another's `give_way`, on its runner's thread: never handed over
    held: list[Call] = field(default_factory=list)  # its calls not done when it last gave way

    @property
    def starting(self) -> bool:
        """A batch of starting streams: it started with first calls only."""
        return all(call.first for call in self.calls[:self.founders])

    def __post_init__(self):
        self.founders = len(self.calls)

    def is_set(self) -> bool:
        return all(call.cancelled for call in self.calls)

    def joins(self) -> list[Any]:
        """The works of the calls that join the batch now, at a step boundary of its runner: those waiting with
        its key, in the order of asking, up to the first call waiting with another key (none overtakes it), while
        a call the batch started with has no result yet (so the batch ends at most one generation after its
        founders: nobody waits more than one batch behind it); no first call while the batch may give way to it (a
        runner that takes joins calls `give_way` before them at every boundary). Their results are `run_batch`'s
        values after those of the calls before (or handed out)."""
        with self.gathering._changed:
            return [call.work for call in self.gathering._join(self)]

    def cancelled(self, index: int) -> bool:
        """Whether the caller of call `index` has left it (its generation may stop at the next step boundary)."""
        return self.calls[index].cancelled

    def hand_over(self) -> bool:
        """Whether the runner leaves the batch now to a thread whose call is still in it, its own call (if any) having
        its result: if so, `run_batch` is called again with this batch on that thread (its `state` kept) and the
        runner returns at once (its value ignored), so that its caller goes on too."""
        thread = threading.get_ident()
        with self.gathering._changed:
            if self.nested or all(call.done for call in self.calls) or any(
                    c.thread == thread and not c.done for c in self.calls):
                return False
            self.handovers += 1
            self.gathering._parked = self
            self.gathering._changed.notify_all()
            return True

    def give_way(self, set_aside: Callable[[], None]) -> bool:
        """At a step boundary: whether starting streams ran first. When the batch is not of starting streams, the calls
        it held when it last gave way are done, no call it left in line then still waits (never two starting batches in
        a row ahead of a call waiting) and first calls wait (the oldest's key, in the order of asking), they are
        taken out of the line, `set_aside()` is called (the runner keeps its state out of what they may use) and they
        run to their end as a batch of their own on this thread (it takes starting streams in at its boundaries, as any
        such batch does, and is never handed over), each call getting its result as its steps are done; then the
        runner goes on with this batch from where it was. Should `set_aside()` raise, they get its error too."""
        with self.gathering._changed:
            calls = self.gathering._give_way(self)
        if not calls:
            return False
        try:
            set_aside()
        except BaseException as err:  # taken out of the line, they get it with the batch's own calls
            with self.gathering._changed:
                for call in calls:
                    self.gathering._settle(call, None, err)
            raise
        self.gathering._run_nested(RunningBatch(calls, self.gathering, nested=True))
        return True

    def hand_out(self, index: int, value: Any = None, error: BaseException | None = None) -> None:
        """Call `index`'s result before the batch ends: its caller goes on (a cancelled call gets Cancelled)."""
        with self.gathering._changed:
            self.gathering._settle(self.calls[index], value, error)

    def release(self) -> None:
        """The batch's device work is queued: the next batch may start, its work queued behind this one's, while this
        one's results are read back and finished. The gathering releases a batch at its end if its runner did not."""
        with self.gathering._changed:
            self.gathering._release(self)


@dataclass(eq=False)
class Gathering:
    """`run_batch(works, batch)` returns one value per work, in order; `batch.is_set()` says when to stop and
    `batch.release()` when the batch's device work is queued."""

    run_batch: Callable[[list[Any], RunningBatch], list[Any]]
    _waiting: list[Call] = field(default_factory=list)  # in the order of asking
    _in_batches: list[Call] = field(default_factory=list)  # calls of batches that have not handed out their results
    _queueing: bool = False  # a batch is queueing its device work: it has not been released yet
    _members: dict[int, Member] = field(default_factory=dict)  # by thread
    _asked: int = 0  # places in the order of asking given so far
    _free_at: float = 0.0  # when the last batch handed out its results (time.monotonic())
    _owed: list[Call] = field(default_factory=list)  # the calls left in line when a starting batch was taken last
    _gives_way: bool = False  # its runner gives way to starting streams (it called RunningBatch.give_way)
    _runner: int | None = None  # the thread that ran the last batch
    _finishing: set[int] = field(default_factory=set)  # threads running a batch that has not handed out its results
    _completing: set[int] = field(default_factory=set)  # threads completing the value a batch gave them (`completing`)
    _parked: RunningBatch | None = None  # a batch its runner handed over, for a thread of its calls to run on
    _changed: threading.Condition = field(default_factory=lambda: threading.Condition(threading.Lock()))

    @property
    def _started_last(self) -> bool:
        """Whether the last batch (or one run in `give_way`) was of starting streams, taken ahead of calls that still
        wait for their batch (not cancelled) (lock held)."""
        return any(call in self._waiting and not call.cancelled for call in self._owed)

    @contextlib.contextmanager
    def member(self) -> Iterator[None]:
        """Within the block, this thread's calls come one after another: batches wait for its next call."""
        thread = threading.get_ident()
        with self._changed:
            if thread not in self._members:
                self._asked += 1
                self._members[thread] = Member(0, self._asked)
            self._members[thread].blocks += 1
        try:
            yield
        finally:
            with self._changed:
                self._members[thread].blocks -= 1
                if not self._members[thread].blocks:
                    del self._members[thread]
                self._changed.notify_all()

    @contextlib.contextmanager
    def completing(self) -> Iterator[None]:
        """Within the block, this thread completes the value its call got (the engine decodes its audio): a member is
        waited for meanwhile as while its call is in a batch, and its grace starts at the block's end."""
        thread = threading.get_ident()
        with self._changed:
            self._completing.add(thread)
        try:
            yield
        finally:
            with self._changed:
                self._completing.discard(thread)
                self._free_at = max(self._free_at, time.monotonic())
                self._changed.notify_all()

    def run(self, work: Any, key: Hashable, cancel: threading.Event | None = None) -> Any:
        """`work`'s value, computed in a batch with the calls of equal keys waiting at the same time."""
        with self._changed:
            member = self._members.get(threading.get_ident())
            if member is None:
                self._asked += 1
                call = Call(work, key, cancel, self._asked, first=False)
            else:
                call = Call(work, key, cancel, member.since, first=member.calls == 0)
                member.calls += 1
            self._waiting.append(call)
            self._waiting.sort(key=lambda waiting: waiting.since)
            self._changed.notify_all()
        while True:
            with self._changed:
                # a call in a batch waits for its end, cancelled or not (the end says what became of it)
                while not call.done and not self._takes_over(call) and not (
                        call in self._waiting and (call.cancelled or self._starts_here())):
                    self._changed.wait(self._pause_s())
                if call.done:
                    break
                if self._takes_over(call):  # its batch was handed over: this thread runs it on
                    batch, self._parked = self._parked, None
                elif call.cancelled:  # not in a batch yet: it leaves the line
                    self._waiting.remove(call)
                    self._changed.notify_all()
                    raise Cancelled("Stopped.")
                else:
                    batch = RunningBatch(self._take(), self)  # the device is free: this thread runs the next batch
                    self._in_batches += batch.calls
                    self._queueing = True
                self._runner = call.thread
                self._finishing.add(call.thread)
            self._run(batch)  # unlocked
        if call.error is not None:
            raise call.error
        return call.value

    def _takes_over(self, call: Call) -> bool:
        """Whether `call`'s thread runs on the batch handed over, which holds it (lock held)."""
        return self._parked is not None and not call.done and call in self._parked.calls

    def _wait_s(self) -> float:
        """How long before the next batch may start: while one is queueing, or while the next call of a member that
        could join it is still to come: until the batch that member is in has ended and it has completed its value,
        else at most GRACE_S after the last batch ended (or a value was completed) or, for a batch of starting
        streams, after its oldest call came if that was later (lock held)."""
        if self._queueing or not self._waiting:
            return POLL_S
        asking = {call.thread for call in self._waiting}
        starting = self._starting()  # the next batch is of starting streams: only a first call could join it
        awaited = {thread for thread, member in self._members.items()
                   if thread not in asking and not (starting and member.calls)}
        if not awaited:
            return 0.0
        if awaited & self._completing or any(call.thread in awaited for call in self._in_batches):
            return POLL_S  # it asks again once its batch has ended and it has completed its value
        since = max(self._free_at, min(call.asked_at for call in starting)) if starting else self._free_at
        return since + GRACE_S - time.monotonic()

    def _starts_here(self) -> bool:
        """Whether this thread starts the next batch now: it may start, and the thread that ran the last batch is
        this one or waits for none (its call may wait while it finishes a batch of another key: it waits then only
        once that batch has ended) (lock held)."""
        if self._wait_s() > 0:
            return False
        return (self._runner in (None, threading.get_ident()) or self._runner in self._finishing
                or all(c.thread != self._runner for c in self._waiting))

    def _pause_s(self) -> float:
        """How long to wait for a change before looking again (lock held)."""
        wait = self._wait_s()
        return min(wait, POLL_S) if wait > 0 else POLL_S

    def _starting(self) -> list[Call]:
        """The waiting calls of streams that are starting: they go first, by themselves (their first audio waits for
        their batch, the others' next pieces are ahead of what plays), but not twice in a row (lock held)."""
        return [] if self._started_last else [call for call in self._waiting if call.first]

    def _take(self) -> list[Call]:
        """The next batch, out of the line: the oldest call of the starting ones, or else of all (of all but first
        calls, if any, when the runner gives way: it runs them at the batch's first boundary), and every other one of
        its key in that group, in the order of asking (lock held)."""
        starting = self._starting()
        others = [call for call in self._waiting if not call.first] if self._gives_way else []
        group = starting or others or self._waiting
        batch = [call for call in group if call.key == group[0].key]
        # never two starting batches in a row: the others waiting have the next batch (it may give way once, `give_way`)
        self._waiting = [call for call in self._waiting if call not in batch]
        self._owed = [call for call in self._waiting if not call.first] if starting else []
        return batch

    def _join(self, batch: RunningBatch) -> list[Call]:
        """Take into `batch` the waiting calls that may join it now (RunningBatch.joins) (lock held)."""
        joining = self._joining(batch)
        self._waiting = [call for call in self._waiting if call not in joining]
        batch.calls += joining
        self._in_batches += joining
        return joining

    def _joining(self, batch: RunningBatch) -> list[Call]:
        """The waiting calls that may join `batch` now, left in the line (lock held)."""
        if all(call.done for call in batch.calls[:batch.founders]):
            return []
        key, joining = batch.calls[0].key, []
        gives_way = self._may_give_way(batch)
        for call in self._waiting:
            if batch.starting and not call.first:
                continue  # a batch of starting streams stays theirs (its steps as short as can be)
            if gives_way and call.first:
                continue  # it runs before the batch's next step, in a batch of its own (`give_way`)
            if call.key != key:
                break
            if not call.cancelled:  # a cancelled one leaves the line by itself
                joining.append(call)
        return joining

    def _may_give_way(self, batch: RunningBatch) -> bool:
        """Whether `batch` lets waiting first calls run first (RunningBatch.give_way) (lock held)."""
        return not batch.starting and all(call.done for call in batch.held)

    def _give_way(self, batch: RunningBatch) -> list[Call]:
        """The first calls that run now before `batch`'s next step, out of the line (lock held)."""
        self._gives_way = True
        starting = [call for call in self._waiting if call.first and not call.cancelled]
        # never two starting batches in a row: the calls it left in line when it gave way last have the next batch
        if not starting or not self._may_give_way(batch) or self._started_last:
            return []
        first = [call for call in starting if call.key == starting[0].key]
        self._waiting = [call for call in self._waiting if call not in first]
        self._in_batches += first
        batch.held = [call for call in batch.calls if not call.done]
        # as a starting batch taken (`_take`): the calls left in line, which the batch does not take in, come next
        joining = self._joining(batch)
        self._owed = [call for call in self._waiting if not call.first and call not in joining]
        return first

    def _settle(self, call: Call, value: Any, error: BaseException | None) -> None:
        """Give `call` its value or error, once (lock held)."""
        if call.done:
            return
        call.value, call.error = value, error
        if error is None and call.cancelled:
            call.error = Cancelled("Stopped.")
        call.done = True
        self._in_batches = [c for c in self._in_batches if c is not call]
        self._changed.notify_all()

    def _release(self, batch: RunningBatch) -> None:
        """Let the next batch start, once per batch (lock held)."""
        if not batch.released:
            batch.released, self._queueing = True, False
            self._changed.notify_all()

    def _run(self, batch: RunningBatch) -> None:
        """Run `batch` and hand every call its value or error; a call cancelled meanwhile gets Cancelled."""
        values, error, handed_over = self._values(batch)
        with self._changed:
            # another thread runs it on (or has already taken it: `_parked` says nothing then)
            if handed_over:  # `_values` says so only without an error
                self._finishing.discard(threading.get_ident())
                self._changed.notify_all()
                return
            if self._parked is batch:
                self._parked = None
            for call, value in zip(batch.calls, values):  # those not handed out yet
                self._settle(call, value, error)
            self._finishing.discard(threading.get_ident())
            self._release(batch)
            self._free_at = time.monotonic()
            self._changed.notify_all()

    def _run_nested(self, batch: RunningBatch) -> None:
        """Run `batch` inside another's `give_way`, on its runner's thread, and hand every call its value or error: the
        other batch still runs, so the next batch may not start and this thread still finishes one."""
        values, error, _ = self._values(batch)
        with self._changed:
            for call, value in zip(batch.calls, values):  # those not handed out yet
                self._settle(call, value, error)

    def _values(self, batch: RunningBatch) -> tuple[list[Any], BaseException | None, bool]:
        """`run_batch`'s values for `batch`, the error every call not handed out yet gets, and whether its runner
        handed it over."""
        handovers = batch.handovers  # only this thread, its runner now, changes it until it hands it over
        try:
            values = list(self.run_batch([call.work for call in batch.calls], batch))
        except BaseException as err:  # every call of the batch gets it, the gathering lives on
            return [None] * len(batch.calls), err, False
        handed_over = batch.handovers != handovers
        if handed_over or len(values) == len(batch.calls):
            return values, None, handed_over
        return [None] * len(batch.calls), RuntimeError("a value per call"), False  # every call gets it, none waits on
