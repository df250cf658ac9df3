"""WeTextProcessing's grammars in child processes of their own: pynini keeps Python's GIL for a whole call
(41 s for 50,000 characters), which froze every thread of the app meanwhile (the GPU worker, the web server's
event loop, Stop). In a child, the app's threads keep running and Stop abandons a run at once.

CHILDREN children per app process, started on first use or by `start_child` ("spawn": each imports only this
module and `engine.text.normalize`, no torch), reused for later calls, one call at a time each. Waiting calls are
served by turn (`_Pool.take`): a stream's first run, which its first audio waits for, ahead of later runs that came
just before it. On Stop during a run that child is killed and a new one started, its grammar loading: the next call
never waits behind the stopped run, nor for that loading where another child is free. A child that dies gives a
TextInputError for that call and is replaced at the next. The children are daemons: they end with the app.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import heapq
import itertools
import multiprocessing
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

from engine.errors import Cancelled, TextInputError, VoiceDeskError

POLL_S = 0.05  # how often a caller looks at its cancel event while waiting
CHILDREN = 2  # two runs at once halve the first piece's wait of 8 streams starting together (p90 0.8-0.9 s -> 0.4-0.5
# on a 2-core CPU), for one child's memory more (~90 MB loaded, ~145 MB after 700 characters); a third gained nothing
# there (docs/latency.md)
FIRST_RUN_HEAD_START = 32  # a first run is served as if it had come this many calls earlier: ahead of the later
# runs of the streams that came before it (a stream waits with one call at a time, the app serves ~8 streams at
# once), yet a later run lets at most this many first runs that came after it go first: it is never starved
TRIM_WHEN_IDLE_S = 0.05  # a child gives a run's memory back once no call has come for this long after its answer:
# the trim takes 72 ms after 8,000 characters, which a call sent meanwhile waited for (docs/latency.md)


@dataclass
class _Child:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    start_number: int  # its place in the order the pool started its children


class _Pool:
    """The children, each lent to one call at a time: a free one goes to the waiting call with the earliest turn,
    its arrival (a count of calls) less FIRST_RUN_HEAD_START for a first run; at the same turn a first run, else
    arrival order. Of the free children, the one started first goes: a child started later in the place of a
    stopped or dead one may still be loading its grammar (seconds), and a slot with none would start one."""

    def __init__(self, size: int):
        self.children: list[_Child | None] = [None] * size
        self._free = list(range(size))  # slots of children lent to no call
        self._waiting: list[tuple[int, bool, int]] = []  # a heap of (turn, not first, arrival)
        self._arrivals = itertools.count()
        self._starts = itertools.count()
        self._changed = threading.Condition()

    def take(self, *, first: bool, cancel: threading.Event | None) -> int:
        """A free child's slot, once the calls with earlier turns have one; Stop is heard while waiting."""
        with self._changed:
            arrival = next(self._arrivals)
            ticket = (arrival - FIRST_RUN_HEAD_START if first else arrival, not first, arrival)
            heapq.heappush(self._waiting, ticket)
            try:
                while True:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled("Stopped.")
                    if self._free and self._waiting[0] == ticket:
                        break
                    self._changed.wait(POLL_S)
            except BaseException:  # Stop, or an interrupt while waiting: the turn is given up, not left in line
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()  # the next in turn may be free to go now
                raise
            heapq.heappop(self._waiting)
            self._changed.notify_all()  # the next in turn may find another child free
            slot = min(self._free, key=self._lending_order)
            self._free.remove(slot)
            return slot

    def _lending_order(self, slot: int) -> tuple[int, int]:
        """The order free slots are lent in: a running child, the earliest started first; a dead one (replaced in
        its slot); none."""
        child = self.children[slot]
        if child is None:
            return 2, 0
        return (0 if child.process.is_alive() else 1), child.start_number

    def give(self, slot: int) -> None:
        with self._changed:
            self._free.append(slot)
            self._changed.notify_all()

    def start_free(self, language: str) -> None:
        """Start the children lent to no call, unless running (those lent are their calls' to start)."""
        with self._changed:
            for slot in self._free:
                self.started(slot, language)

    def started(self, slot: int, language: str) -> _Child:
        """The slot's child, started if there is none (or it died) and then loading `language`'s grammar at once."""
        child = self.children[slot]
        if child is None or not child.process.is_alive():
            self.stop(slot)
            context = multiprocessing.get_context("spawn")
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, language), name="voicedesk-normalize",
                                      daemon=True)
            process.start()
            theirs.close()  # only the child holds its end: its death reads as EOF here
            self.children[slot] = child = _Child(process, ours, next(self._starts))
        return child

    def stop(self, slot: int) -> None:
        """Kill the slot's child, if there is one (the next call there starts another)."""
        child, self.children[slot] = self.children[slot], None
        if child is not None:
            child.process.kill()
            child.process.join()
            child.conn.close()


_pool = _Pool(CHILDREN)


def normalized_in_child(text: str, *, language: str, pinyin: bool, first: bool = False,
                        cancel: threading.Event | None = None) -> str:
    """`normalize.outside_markup(text, normalize.wetext_grammar(language), pinyin)`, run in a child; `first`: the
    run a stream's first piece waits for (short: normalized_parts' first), served before later runs (`_Pool`).

    Raises
    ------
    Cancelled
        When `cancel` is set before the result came (while waiting for a child, or its run: the child is then
        killed).
    TextInputError
        When the child died during the call, or the grammar cannot be loaded there.
    """
    slot = _pool.take(first=first, cancel=cancel)
    try:
        child = _pool.started(slot, language)
        try:
            child.conn.send((text, language, pinyin))
            while not child.conn.poll(POLL_S):  # a dead child's end of the pipe reads as EOF: poll returns
                if cancel is not None and cancel.is_set():
                    _pool.stop(slot)
                    _pool.started(slot, language)  # a fresh child loads its grammar meanwhile: the next call won't wait
                    raise Cancelled("Stopped.")
            ok, value = child.conn.recv()
        except (EOFError, OSError):
            _pool.stop(slot)
            raise TextInputError("Speaking numbers and dates failed: the text normalisation process ended "
                                 f"unexpectedly (exit code {child.process.exitcode}). Try again, or turn "
                                 "'Speak numbers and dates' off.") from None
    finally:
        _pool.give(slot)
    if not ok:
        raise value
    return value


def start_child(language: str) -> None:
    """Start the children, unless running: each loads `language`'s grammar (seconds) while the app goes on."""
    _pool.start_free(language)


def stop() -> None:
    """Kill the children, if any (the next calls start others)."""
    for slot in range(len(_pool.children)):
        _pool.stop(slot)


def _serve(conn: Connection, language: str) -> None:
    """A child: load `language`'s grammar, then answer (text, language, pinyin) requests with (True, spoken) or
    (False, error) until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the app's to handle: it ends the child as a daemon
    from engine.text.normalize import outside_markup, wetext_grammar
    try:
        wetext_grammar(language)
    except VoiceDeskError:
        pass  # said to the request that needs it
    give_back_memory = _memory_giver()
    while True:
        try:
            text, language, pinyin = conn.recv()
        except EOFError:
            return
        try:
            conn.send((True, outside_markup(text, wetext_grammar(language), pinyin)))
        except VoiceDeskError as err:
            conn.send((False, err))
        except Exception as err:  # any other failure, as a message the app can show (it may not pickle)
            conn.send((False, TextInputError(f"Speaking numbers and dates failed ({type(err).__name__}: {err}).")))
        if not conn.poll(TRIM_WHEN_IDLE_S):  # idle: the runs' memory given back; a call waiting is served first
            give_back_memory()


def _memory_giver() -> Callable[[], object]:
    """glibc's malloc_trim(0): the memory freed after a run given back to the system (1-60 ms, docs/latency.md). A
    run's working memory grows with its text (~0.07 MB a character: 670 MB resident after 8,000), and the child
    kept that of its longest run all its life. Where the C library has none, a no-op."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):
        return lambda: None
    return lambda: trim(0)
