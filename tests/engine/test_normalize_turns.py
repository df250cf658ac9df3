"""Whose turn it is in the text normalisation children (normalize_process._Pool), no child started: a stream's
first run before the later runs waiting, equals in arrival order, a later run passed by at most
FIRST_RUN_HEAD_START first runs that came after it, Stop heard while waiting, two calls at once with two children;
which free child goes (stand-in processes)."""
import threading
import time

import pytest

from engine.errors import Cancelled
from engine.text import normalize_process
from engine.text.normalize_process import _Child, _Pool

HANG_S = 60  # a guard against a test that would hang: no result here depends on time


def until(condition) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.001)


class Caller(threading.Thread):
    """A call that waits for a child's slot in `pool`, notes its name in `served` once it has one, and gives the slot
    back; `error` holds what it raised."""

    def __init__(self, pool, served, name, *, first, cancel=None):
        super().__init__(daemon=True)
        self.pool, self.served, self.label, self.first, self.cancel = pool, served, name, first, cancel
        self.slot = self.error = None

    def run(self):
        try:
            self.slot = self.pool.take(first=self.first, cancel=self.cancel)
        except Cancelled as err:
            self.error = err
            return
        self.served.append(self.label)
        self.pool.give(self.slot)


def queued(pool, served, calls, cancel=None) -> list[Caller]:
    """`calls` ((name, first) pairs) waiting in `pool`, in that order of arrival."""
    callers, waiting = [], len(pool._waiting)
    for name, first in calls:
        callers.append(Caller(pool, served, name, first=first, cancel=cancel))
        callers[-1].start()
        until(lambda: len(pool._waiting) == waiting + len(callers))
    return callers


def served_after(pool, held, calls) -> list[str]:
    """The order in which `calls` ((name, first), arriving in that order while slot `held` is lent) are served."""
    served = []
    callers = queued(pool, served, calls)
    pool.give(held)
    for caller in callers:
        caller.join(HANG_S)
    return served


def test_a_first_run_goes_before_the_later_runs_that_came_before_it_and_equals_keep_their_order():
    pool = _Pool(1)
    held = pool.take(first=False, cancel=None)
    calls = [("later 1", False), ("later 2", False), ("first 1", True), ("first 2", True), ("later 3", False)]
    assert served_after(pool, held, calls) == ["first 1", "first 2", "later 1", "later 2", "later 3"]


def test_a_later_run_is_passed_by_at_most_the_head_start_of_first_runs(monkeypatch):
    monkeypatch.setattr(normalize_process, "FIRST_RUN_HEAD_START", 2)
    pool = _Pool(1)
    held = pool.take(first=False, cancel=None)
    calls = [("later", False), ("first 1", True), ("first 2", True), ("first 3", True)]
    assert served_after(pool, held, calls) == ["first 1", "first 2", "later", "first 3"]


def test_stop_is_heard_while_waiting_and_the_next_in_turn_goes_on():
    pool = _Pool(1)
    held = pool.take(first=False, cancel=None)
    served, cancel = [], threading.Event()
    (stopped,) = queued(pool, served, [("stopped", True)], cancel)
    (after,) = queued(pool, served, [("after", False)])
    cancel.set()
    stopped.join(HANG_S)
    assert isinstance(stopped.error, Cancelled)  # heard while the slot is still lent
    assert len(pool._waiting) == 1  # its turn given up
    pool.give(held)
    after.join(HANG_S)
    assert served == ["after"]


def test_a_stop_already_pressed_takes_no_child():
    pool, cancel = _Pool(1), threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        pool.take(first=True, cancel=cancel)
    served = []
    after = Caller(pool, served, "after", first=False)  # in a thread: a turn kept would make it wait for ever
    after.start()
    after.join(HANG_S)
    assert served == ["after"] and after.slot == 0  # neither the slot nor the turn was kept


def test_with_two_children_two_calls_go_at_once_and_a_third_waits_for_one():
    pool = _Pool(2)
    slots = {pool.take(first=False, cancel=None), pool.take(first=True, cancel=None)}
    assert slots == {0, 1}
    (third,) = queued(pool, [], [("third", False)])
    assert third.slot is None  # waiting
    pool.give(1)
    third.join(HANG_S)
    assert third.slot == 1


class Process:
    """A child's process as the pool sees it: alive or not."""

    def __init__(self, alive: bool):
        self.alive = alive

    def is_alive(self) -> bool:
        return self.alive


def test_the_free_child_started_first_goes_then_a_dead_ones_slot_then_one_with_none():
    """A child started later (in a stopped or dead one's place) may still be loading its grammar; a dead one is
    replaced in its own slot; a slot with none would start one."""
    pool = _Pool(4)
    pool.children = [_Child(Process(alive=True), None, 2), None, _Child(Process(alive=True), None, 1),
                     _Child(Process(alive=False), None, 0)]
    assert [pool.take(first=False, cancel=None) for _ in range(4)] == [2, 0, 3, 1]


def test_an_interrupt_while_waiting_gives_up_the_turn(monkeypatch):
    """An exception other than Stop while waiting (Ctrl+C in the main thread) leaves no turn behind that every later
    call would wait for."""
    pool = _Pool(1)
    held = pool.take(first=False, cancel=None)
    monkeypatch.setattr(pool._changed, "wait", lambda _timeout: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        pool.take(first=True, cancel=None)
    assert pool._waiting == []
    monkeypatch.undo()
    pool.give(held)
    assert served_after(pool, pool.take(first=False, cancel=None), [("next", False)]) == ["next"]
