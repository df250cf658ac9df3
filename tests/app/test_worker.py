import contextlib
import logging
import queue
import threading
import time

import pytest
import torch

from app.worker import outcome
from engine.errors import Cancelled, GpuMemoryError

WAIT_S = 30  # generous: nothing is timed, only a broken test waits this long


def until(condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def test_jobs_run_one_at_a_time_in_order(worker):
    running, order, overlap = [], [], []

    def job(i):
        def fn(cancel):
            running.append(i)
            overlap.append(len(running))
            time.sleep(0.02)
            order.append(i)
            running.remove(i)
            return i
        return fn

    jobs = [worker.submit(job(i)) for i in range(5)]
    results = [list(j.follow(worker))[-1] for j in jobs]
    assert results == [("result", i) for i in range(5)] and order == list(range(5)) and max(overlap) == 1


def test_waiting_jobs_report_their_place_in_line(worker):
    release = threading.Event()
    blocker = worker.submit(lambda cancel: release.wait(5))
    second = worker.submit(lambda cancel: "second")
    third = worker.submit(lambda cancel: "third")
    time.sleep(0.1)
    assert (worker.place(blocker), worker.place(second), worker.place(third)) == (0, 2, 3)
    events = third.follow(worker, poll_s=0.01)
    assert next(events) == ("waiting", 3)
    release.set()
    assert list(events)[-1] == ("result", "third")


def test_streamed_items_then_result(worker):
    job = worker.submit(lambda cancel: iter([1, 2, 3]))
    assert list(job.follow(worker)) == [("item", 1), ("item", 2), ("item", 3), ("result", None)]


def test_cancel_stops_the_running_job_and_drops_waiting_ones(worker):
    started = threading.Event()

    def steps(cancel):
        started.set()
        for step in range(1000):
            if cancel.is_set():
                raise Cancelled("Stopped.")
            yield step
            time.sleep(0.005)

    running = worker.submit(steps, owner="alice")
    waiting = worker.submit(lambda cancel: "never", owner="alice")
    other = worker.submit(lambda cancel: "bob's", owner="bob")
    started.wait(2)
    assert worker.cancel("alice") == 2
    with pytest.raises(Cancelled, match="Stopped"):
        list(running.follow(worker))
    with pytest.raises(Cancelled, match="before it started"):
        list(waiting.follow(worker))
    assert list(other.follow(worker))[-1] == ("result", "bob's")


def test_a_failing_job_does_not_stop_the_worker(worker):
    def boom(cancel):
        raise RuntimeError("CUDA error: out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        worker.call(boom)
    assert worker.call(lambda cancel: 42) == 42


# PyTorch 2.x's words when the caching allocator gives up (one line)
TORCH_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.63 GiB of which 1.20 GiB "
             "is free. Including non-PyTorch memory, this process has 6.10 GiB memory in use. Of the allocated memory "
             "5.50 GiB is allocated by PyTorch. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


def test_running_out_of_gpu_memory_is_said_for_a_person(worker, caplog):
    """An 8 GB card with a game open: the app's own error (the page's message line, the API's 503), saying what
    was asked for, what was free and what to do; PyTorch's allocator notes go to the log."""
    def greedy(cancel):
        raise torch.cuda.OutOfMemoryError(TORCH_OOM)

    with pytest.raises(GpuMemoryError) as raised, caplog.at_level(logging.WARNING, logger="app"):
        worker.call(greedy)
    said = str(raised.value)
    assert said.startswith("The GPU ran out of memory for this request (CUDA out of memory. Tried to allocate "
                           "2.00 GiB. GPU 0 has a total capacity of 7.63 GiB of which 1.20 GiB is free). "), said
    assert said.endswith("close them and try again.")
    assert "PYTORCH_CUDA_ALLOC_CONF" not in said and "Including" not in said
    assert "PYTORCH_CUDA_ALLOC_CONF" in caplog.text
    assert worker.call(lambda cancel: 42) == 42


class StopAtTheEnd(queue.Queue):
    """A job's events, with a Stop of its owner made at the moment its ending is handed out: what a page's Stop
    or leave right after the result does, without the race."""

    def __init__(self, worker, owner):
        super().__init__()
        self.worker, self.owner, self.stopped = worker, owner, []

    def put(self, event, *args, **kwargs):
        if event[0] in ("result", "error"):
            self.stopped.append(self.worker.cancel(self.owner))
        super().put(event, *args, **kwargs)


@pytest.mark.parametrize("ending", ["result", "error"])
def test_a_stop_once_a_job_has_ended_stops_nothing(worker, ending):
    """A job's end goes out after the job left the running set: a Stop then counts no job (no "Stopping…" for a
    finished generation, no CLOSED_EARLY for a finished answer)."""
    go = threading.Event()

    def fn(cancel):
        go.wait(WAIT_S)
        if ending == "error":
            raise RuntimeError("boom")
        return "done"

    job = worker.submit(fn, owner="page")
    job._events = events = StopAtTheEnd(worker, "page")
    go.set()
    with contextlib.suppress(RuntimeError):
        list(job.follow(worker))
    assert events.stopped == [0]


def test_lanes_take_turns(worker):
    """A burst of API requests waits its turn with the person at the app: lanes alternate, each in order."""
    release, order = threading.Event(), []
    blocker = worker.submit(lambda cancel: release.wait(5), owner="session-a")

    def job(name):
        return lambda cancel: order.append(name)

    api = [worker.submit(job(f"api{i}"), owner=f"api-{i}", lane="api") for i in range(3)]
    ui = [worker.submit(job(f"ui{i}"), owner="session-b") for i in range(2)]
    time.sleep(0.1)
    assert [worker.place(j) for j in api + ui] == [2, 4, 6, 3, 5]
    release.set()
    for j in [blocker, *api, *ui]:
        list(j.follow(worker, poll_s=0.01))
    assert order == ["api0", "ui0", "api1", "ui1", "api2"]


def test_a_request_of_two_jobs_keeps_its_turn_between_them(worker):
    """Making a voice from a clip, then speaking with it: whoever asked later does not slip in between,
    however long the first request takes to hand over its second job."""
    release, handed_over, order = threading.Event(), threading.Event(), []

    def job(name):
        return lambda cancel: order.append(name)

    blocker = worker.submit(lambda cancel: release.wait(5), owner="someone")

    def first_request():
        with worker.turn("a"):
            worker.call(job("a-voice"), owner="a")
            handed_over.wait(5)  # a slow handler between its two jobs
            list(worker.submit(job("a-speech"), owner="a").follow(worker, poll_s=0.01))

    asking = threading.Thread(target=first_request)
    asking.start()
    deadline = time.monotonic() + 5
    while worker.waiting("a") == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    later = worker.submit(job("b"), owner="b")  # asked after a
    release.set()
    while order != ["a-voice"]:
        assert time.monotonic() < deadline + 5, order
        time.sleep(0.01)
    assert worker.place(later) >= 1  # b waits for a's second job
    handed_over.set()
    asking.join(5)
    list(later.follow(worker, poll_s=0.01))
    list(blocker.follow(worker, poll_s=0.01))
    assert order == ["a-voice", "a-speech", "b"]


def test_a_turn_left_without_a_second_job_frees_the_line(worker):
    with worker.turn("a"):
        worker.call(lambda cancel: "voice", owner="a")
    assert worker.call(lambda cancel: "next", owner="b") == "next"


def test_a_waiting_job_says_its_place_then_gives_its_result(worker):
    release = threading.Event()
    blocker = worker.submit(lambda cancel: release.wait(5), owner="someone")
    places = worker.result(worker.submit(lambda cancel: "voice", owner="a"))
    assert next(places) == 2  # the running job is 1st in line
    release.set()
    assert outcome(places) == "voice"
    list(blocker.follow(worker, poll_s=0.01))


def test_a_waiting_job_left_by_its_page_never_runs_and_frees_the_turn(worker):
    """The page goes away while its voice waits in line inside a turn: Gradio closes the handler, which
    closes the result; the job is dropped and whoever asked next is not held behind the turn."""
    release, ran = threading.Event(), []
    blocker = worker.submit(lambda cancel: release.wait(5), owner="someone")

    def handler():
        with worker.turn("a"):
            yield from worker.result(worker.submit(lambda cancel: ran.append("a-voice"), owner="a"))
            yield "speaking"

    page = handler()
    assert next(page) == 2  # its voice waits, behind the running job
    later = worker.submit(lambda cancel: ran.append("b"), owner="b")
    assert worker.place(later) == 3
    page.close()
    assert worker.place(later) == 2  # the dropped job left the line at once
    release.set()
    list(later.follow(worker, poll_s=0.01))
    list(blocker.follow(worker, poll_s=0.01))
    assert ran == ["b"]


def test_a_later_stop_keeps_a_job_abandoned(worker):
    """The page went away (abandoned: nothing it made is kept), then a Stop arrives for the same owner."""
    started, release = threading.Event(), threading.Event()

    def held(cancel):
        started.set()
        release.wait(5)  # no timing matters: the test releases it
        return "made"

    job = worker.submit(held, owner="carol")
    assert started.wait(5)
    worker.cancel("carol", abandoned=True)
    worker.cancel("carol")  # a Stop after it
    release.set()
    assert job.abandoned
    list(job.follow(worker))
    assert job.abandoned  # still, once it has ended


@pytest.mark.parametrize("freed", [("b", "c"), ("c", "b")])
def test_with_the_first_thread_busy_a_job_runs_on_the_idle_thread_freed_last(worker, freed):
    """CUDA keeps state per thread: while the first thread (the warm-up's) runs a job, the next job side by side
    goes to the idle thread freed last, the one that ran work most recently, not to one idle for longer (the first
    thread's own case is tests/app/test_engine_host.py's)."""
    threads, releases = {}, {name: threading.Event() for name in "abcd"}

    def job(name):
        def fn(cancel):
            threads[name] = threading.get_ident()
            releases[name].wait(WAIT_S)
        return fn

    jobs = {name: worker.submit(job(name), owner=name, batch="same") for name in "abc"}  # three threads side by side
    until(lambda: len(threads) == 3)
    for name in freed:
        releases[name].set()
        outcome(worker.result(jobs[name]))
        until(lambda name=name: worker.cancel(name) == 0)  # it left the worker: its thread is idle
    releases["d"].set()
    outcome(worker.result(worker.submit(job("d"), owner="d", batch="same")))
    releases["a"].set()
    assert len(set(threads.values())) == 3 and threads["d"] == threads[freed[-1]]
