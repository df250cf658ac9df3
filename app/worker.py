"""One GPU, one line of jobs: every engine call (load, voice, generation) runs as a job of this worker.

Gradio handlers submit a job and follow it: while it waits they can show its place in the line,
then they receive what it produces. Stop sets the job's `cancel` event, which the engine checks
between diffusion steps (it raises Cancelled); a job still waiting in line is simply dropped.

A job runs alone unless it was submitted with a `batch` key (Engine.batch_key: generations whose steps and
scoring agree): jobs of equal keys run side by side, each on its own thread, and the engine batches their
generations at its step boundaries (engine/gather.py, continuous batching): two API clients, or the Studio
and a Clone request, share one forward per step instead of waiting for each other. Only the engine knows
rows and steps; the worker only decides which jobs may run together. A job of another key, or one that
runs alone, waits until the running ones end; the line's order is kept (nobody is passed by a job behind
them). Stopping one job of a batch leaves the others' results as they would be alone.

Each job runs on a thread kept for the next ones: on the first thread, where the model was loaded and warmed
up, whenever it is idle (so always for jobs one at a time), else on the idle thread freed last. CUDA
keeps state per thread (cuBLAS and cuDNN handles, cuDNN's convolution plans for each shape): a thread's first
work pays for making it, so a lone client's requests must not wander over threads that never ran one.

Waiting jobs take turns by lane (a browser session, or all API requests together): the next job is
the oldest one of the lane that started a job longest ago, so a burst of API requests cannot push
the person at the app to the back of the line, and the reverse. A request made of several jobs (make
the voice from a clip, then speak) keeps its turn between them (`turn`): those who asked after it
do not slip in between.
"""
from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from engine.errors import Cancelled, GpuMemoryError

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_TOGETHER = 16  # jobs running side by side at most (the engine cuts their batches to its memory budget)


def outcome(steps: Generator[Any, None, T]) -> T:
    """Run a generator such as GpuWorker.result to its end, passing over what it yields; what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


@dataclass(eq=False)
class Job:
    fn: Callable[[threading.Event], Any]  # returns a value, or an iterator whose items are streamed
    owner: str | None
    lane: str | None  # jobs of one lane take turns with those of other lanes
    batch: Hashable | None = None  # jobs of equal keys may run side by side (their generations batched); None: alone
    cancel: threading.Event = field(default_factory=threading.Event)
    abandoned: bool = False  # cancelled because its owner went away, not by Stop
    started_at: float | None = None  # when the worker began it (time.time()); None while it waits
    _events: queue.Queue = field(default_factory=queue.Queue)

    def follow(self, worker: GpuWorker, poll_s: float = 0.25) -> Iterator[tuple[str, Any]]:
        """Yield ("waiting", place in line) while queued, then ("item", x) for each streamed item,
        then ("result", value). Exceptions raised by the job are raised here."""
        last_place = None
        while True:
            try:
                kind, value = self._events.get(timeout=poll_s)
            except queue.Empty:
                place = worker.place(self)
                if place and place != last_place:
                    last_place = place
                    yield "waiting", place
                continue
            if kind == "error":
                raise value
            yield kind, value
            if kind == "result":
                return


class GpuWorker:
    def __init__(self, name: str = "voicedesk-gpu"):
        self._pending: deque[Job] = deque()
        self._running: set[Job] = set()
        self._last_start: dict[str | None, int] = {}  # lane -> number of the last job it started
        self._starts = 0
        self._holding: set[str] = set()  # owners inside `turn`
        self._kept: str | None = None  # the owner whose turn goes on after its job: only its jobs may start
        self._wake = threading.Condition()
        self._closed = False
        self._name = name
        # threads that run jobs, kept for the next ones (a thread's first CUDA work sets up its own state)
        self._threads: list[threading.Thread] = []
        self._handed: list[queue.SimpleQueue[Job | None]] = []  # each thread's next job (None: end)
        self._idle: list[int] = []  # the threads waiting for a job, by number, the one freed last at the end
        self._last_stamp = 0.0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[threading.Event], Any], owner: str | None = None, lane: str | None = None,
               batch: Hashable | None = None) -> Job:
        """Queue `fn`; `lane` defaults to the owner's own. With a `batch` key it may run beside running jobs of
        the same key (give generations Engine.batch_key of their config)."""
        job = Job(fn, owner, owner if lane is None else lane, batch)
        with self._wake:
            if self._closed:
                raise RuntimeError("the worker is shut down")
            self._pending.append(job)
            self._wake.notify()
        return job

    def call(self, fn: Callable[[threading.Event], Any], owner: str | None = None) -> Any:
        """Submit and wait for the result (for short jobs such as making a voice)."""
        return outcome(self.result(self.submit(fn, owner)))

    def result(self, job: Job, show: Callable[[int], Any] = lambda place: place) -> Generator[Any, None, Any]:
        """Follow a job that returns one value: yields `show(place in line)` while it waits, returns the value.
        Closed before that (the page went away; `yield from` passes a close on), it drops the job."""
        try:
            for kind, value in job.follow(self):
                if kind == "waiting":
                    yield show(value)
                elif kind == "result":
                    return value
        finally:
            with self._wake:
                self._stop(job)  # nothing to stop once it has returned

    @contextlib.contextmanager
    def turn(self, owner: str) -> Iterator[None]:
        """Within this block, once a job of `owner` has run, only `owner`'s next job may start (it is
        waited for), until the block ends. Submit the last job inside the block."""
        with self._wake:
            self._holding.add(owner)
        try:
            yield
        finally:
            with self._wake:
                self._holding.discard(owner)
                if self._kept == owner:
                    self._kept = None
                self._wake.notify()

    def place(self, job: Job) -> int:
        """0 while `job` runs (or is done), else its place in line counting the running job: 1 = next."""
        with self._wake:
            if job in self._pending:
                return self._start_order().index(job) + 1 + bool(self._running)
            return 0

    def waiting(self, lane: str) -> int:
        """How many jobs of `lane` wait to start."""
        with self._wake:
            return sum(job.lane == lane for job in self._pending)

    def cancel(self, owner: str, abandoned: bool = False) -> int:
        """Stop every job of `owner`: the running one at its next step, waiting ones at once.
        `abandoned`: the owner went away (its page closed), so nothing it made is to be kept."""
        with self._wake:
            jobs = [j for j in [*self._running, *self._pending] if j.owner == owner]
            for job in jobs:
                job.abandoned = job.abandoned or abandoned
                self._stop(job)
        return len(jobs)

    def _stop(self, job: Job) -> None:
        """Stop `job`: a running one at its next step, a waiting one at once (it leaves the line). Call with the
        lock held."""
        job.cancel.set()
        if job in self._pending:
            self._pending.remove(job)
            job._events.put(("error", Cancelled("Stopped before it started.")))

    def shutdown(self) -> None:
        with self._wake:
            self._closed = True
            for job in self._pending:
                job._events.put(("error", Cancelled("The app is shutting down.")))
            self._pending.clear()
            for job in self._running:
                job.cancel.set()
            self._wake.notify_all()
            threads = [self._thread, *self._threads]
            for handed in self._handed:
                handed.put(None)
        for thread in threads:
            thread.join(timeout=10)

    def _loop(self) -> None:
        """Start each job when its turn comes and it may run (`_next_job`), on a thread of its own."""
        while True:
            with self._wake:
                while (job := self._next_job()) is None and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                self._running.add(job)
                # strictly later than the job started before it: the history orders entries by these stamps
                job.started_at = self._last_stamp = max(time.time(), self._last_stamp + 0.001)
                self._pending.remove(job)
                self._starts += 1
                waiting_lanes = {j.lane for j in self._pending}  # forget lanes with nothing waiting
                self._last_start = {lane: n for lane, n in self._last_start.items() if lane in waiting_lanes}
                self._last_start[job.lane] = self._starts
                if self._kept == job.owner:  # the kept turn goes on in this job: nobody slipped in between
                    self._kept = None
                self._handed[self._idle_thread()].put(job)

    def _idle_thread(self) -> int:
        """The number of the thread to run the next job on: the first thread when idle (it loaded and warmed the
        model), else the idle thread freed last, else a new one (call with the lock held)."""
        if not self._idle:
            number = len(self._threads)
            self._handed.append(queue.SimpleQueue())
            self._threads.append(threading.Thread(target=self._serve, args=(number,),
                                                  name=f"{self._name}-{number + 1}", daemon=True))
            self._threads[number].start()
            return number
        number = 0 if 0 in self._idle else self._idle[-1]
        self._idle.remove(number)
        return number

    def _serve(self, number: int) -> None:
        """Job thread `number`: runs the jobs handed to it, one after another, until the worker shuts down."""
        while (job := self._handed[number].get()) is not None:
            self._run(job, number)

    def _run(self, job: Job, number: int) -> None:
        ending = self._execute(job)
        with self._wake:
            self._running.discard(job)
            self._idle.append(number)
            if job.owner in self._holding:
                self._kept = job.owner
            self._wake.notify_all()
        # only now: whoever has the job's end finds it gone (a Stop or a leave after it counts no stopped job)
        job._events.put(ending)

    def _next_job(self) -> Job | None:
        """The job to start now, or None: nothing waits, a kept turn waits for its owner's next job, or the
        next job may not run beside the running ones (call with the lock held)."""
        order = self._start_order()
        if not order or self._kept not in (None, order[0].owner):
            return None
        job = order[0]
        if not self._running:
            return job
        beside = job.batch is not None and len(self._running) < MAX_TOGETHER
        return job if beside and all(j.batch == job.batch for j in self._running) else None

    def _start_order(self) -> list[Job]:
        """The waiting jobs in the order they will start (call with the lock held)."""
        last, order, waiting = dict(self._last_start), [], list(self._pending)
        for turn in range(self._starts + 1, self._starts + 1 + len(waiting)):
            job = min(waiting, key=lambda j: last.get(j.lane, 0))  # min keeps FIFO among equals
            waiting.remove(job)
            order.append(job)
            last[job.lane] = turn
        if self._kept is not None:
            order.sort(key=lambda job: job.owner != self._kept)  # a kept turn goes first (stable sort)
        return order

    @staticmethod
    def _execute(job: Job) -> tuple[str, Any]:
        """Run `job`, streaming its items; its ending, ("result", value) or ("error", exception). Never raises."""
        try:
            if job.cancel.is_set():
                raise Cancelled("Stopped before it started.")
            value = job.fn(job.cancel)
            if isinstance(value, Iterator):
                try:
                    for item in value:
                        job._events.put(("item", item))
                        if job.cancel.is_set():
                            raise Cancelled("Stopped.")
                finally:
                    close = getattr(value, "close", None)
                    if close is not None:
                        close()  # a generator's cleanup (freeing GPU buffers) runs here, not later
                value = None
            return "result", value
        except torch.cuda.OutOfMemoryError as err:  # short of a resource, not a bug: said as the app's own errors are
            log.warning("out of GPU memory: %s", err)
            return "error", GpuMemoryError.from_torch(err, doing="for this request")
        except BaseException as err:  # everything goes back to the handler, the worker lives on
            return "error", err
