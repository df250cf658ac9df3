"""Calls made at the same time from several threads, run together: continuous batching across callers.

The app's GPU worker runs compatible jobs (two API clients, the Studio and a Clone request) side by side,
each on its own thread; every generation they ask for comes here. When the GPU is free, the next batch
is every call waiting then whose key equals the oldest's, in the order they were asked for; a call that
comes while a batch runs joins the next one, so none waits more than one batch behind another, however
long that one is. Streams that are starting go first, by themselves (one such batch at a time): their
first audio does not wait for the big groups of streams already playing. One of the waiting threads
runs the batch: the one that ran the last batch when it waits too, since CUDA keeps state per thread (cuBLAS
and cuDNN handles, cuDNN's convolution plans for each shape) that a thread's first batches would have to make;
the others wait for their results. A call that finds nothing running and nobody to wait for runs at once.

A thread that asks for one generation after another (a stream's pieces) is a `member` while it does:
the next batch starts once every member's next call is there (or after GRACE_S, should one dawdle), so
that the members share their batches instead of taking turns. A call left by its caller (its `cancel`
set) while it waits leaves at once; inside a batch it stops the batch only when every call in it is
cancelled, and otherwise its result is dropped: the others' tokens are those of a solo run.
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
class AllCancelled:
    """Set once every call of a batch is cancelled: the batch's own cancel event, as the engine reads it."""

    calls: list[Call]

    def is_set(self) -> bool:
        return all(call.cancelled for call in self.calls)


@dataclass(eq=False)
class Gathering:
    """`run_batch(works, cancel)` returns one value per work, in order; `cancel.is_set()` says when to stop."""

    run_batch: Callable[[list[Any], AllCancelled], list[Any]]
    _waiting: list[Call] = field(default_factory=list)
    _busy: bool = False
    _members: dict[int, Member] = field(default_factory=dict)  # by thread
    _asked: int = 0  # places in the order of asking given so far
    _free_at: float = 0.0  # when the last batch ended (time.monotonic())
    _started_last: bool = False  # the last batch was of starting streams only, ahead of others waiting
    _runner: int | None = None  # the thread that ran the last batch
    _changed: threading.Condition = field(default_factory=lambda: threading.Condition(threading.Lock()))

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
            self._changed.notify_all()
        while True:
            with self._changed:
                while not call.done and not call.cancelled and not self._starts_here():
                    self._changed.wait(self._pause_s())
                if call.done:
                    break
                if call in self._waiting and call.cancelled:  # not in a batch yet: it leaves the line
                    self._waiting.remove(call)
                    self._changed.notify_all()
                    raise Cancelled("Stopped.")
                if not self._starts_here():  # cancelled inside the running batch: its end says what became of it
                    self._changed.wait(POLL_S)
                    continue
                batch = self._take()  # the GPU is free: this thread runs the next batch, unlocked
                self._busy, self._runner = True, call.thread
            try:
                self._run(batch)
            finally:
                with self._changed:
                    self._busy = False
                    self._free_at = time.monotonic()
                    self._changed.notify_all()
        if call.error is not None:
            raise call.error
        return call.value

    def _wait_s(self) -> float:
        """How long before the next batch may start: while one runs, or while a member's next call is still
        to come, at most GRACE_S after the last batch (lock held)."""
        if self._busy or not self._waiting:
            return POLL_S
        asking = {call.thread for call in self._waiting}
        if all(thread in asking for thread in self._members):
            return 0.0
        return self._free_at + GRACE_S - time.monotonic()

    def _starts_here(self) -> bool:
        """Whether this thread starts the next batch now: it may start, and the thread that ran the last batch is
        this one or waits for none (lock held)."""
        if self._wait_s() > 0:
            return False
        return self._runner in (None, threading.get_ident()) or all(c.thread != self._runner for c in self._waiting)

    def _pause_s(self) -> float:
        """How long to wait for a change before looking again (lock held)."""
        wait = self._wait_s()
        return min(wait, POLL_S) if wait > 0 else POLL_S

    def _take(self) -> list[Call]:
        """The next batch: the waiting call asked first and every other one of its key, in the order of
        asking. Streams that are starting go first, by themselves (their first audio waits for this batch,
        the others' next pieces are ahead of what plays), but not twice in a row (lock held)."""
        self._waiting.sort(key=lambda call: call.since)
        # never two starting batches in a row: the others wait for one of them at most
        starting = [] if self._started_last else [call for call in self._waiting if call.first]
        self._started_last = bool(starting) and len(starting) < len(self._waiting)
        key = (starting or self._waiting)[0].key
        batch = [call for call in (starting or self._waiting) if call.key == key]
        self._waiting = [call for call in self._waiting if call not in batch]
        return batch

    def _run(self, batch: list[Call]) -> None:
        """Run `batch` and hand every call its value or error; a call cancelled meanwhile gets Cancelled."""
        try:
            values = self.run_batch([call.work for call in batch], AllCancelled(batch))
        except BaseException as err:  # every call of the batch gets it, the gathering lives on
            values, error = [None] * len(batch), err
        else:
            error = None
        for call, value in zip(batch, values):
            call.value, call.error = value, error
            if error is None and call.cancelled:
                call.error = Cancelled("Stopped.")
            call.done = True
