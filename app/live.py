"""Live audio: where a generation's samples meet the page's request for them.

At the click on Generate the page names the generation with a live id of its own making and asks for its
audio at once (`GET /live/stream/<id>`, app/live_route.py), while Gradio runs the handler, which publishes the
samples of the one GPU job under that id. Either side may come first: the samples wait for the listener and
the listener waits for the samples, and a listener that comes late still hears the generation from its start.

One listener and one publisher per id. When the listener goes away before the end, the generation is stopped
(`stop`, what the publisher attached), so the GPU goes to the next job; an error of the publisher's (bad input,
a voice that cannot be made) reaches the listener as the error itself.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator

import numpy as np

from engine.errors import Cancelled, VoiceDeskError

LIVE_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")  # the page's crypto.randomUUID() or token_urlsafe: unguessable
CLAIM_WAIT_S = 120.0  # how long a listener waits for a handler to take its id (Gradio's own queue may hold it)
KEPT_STREAMS = 32  # ids remembered at most: the oldest (finished or never listened to) are forgotten first


class LiveError(VoiceDeskError):
    """A live id that is malformed, unknown or already used."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class LiveStream:
    """The int16 samples of one generation, in order, from a publisher thread to one listener (an event loop).
    `live_id`: the page's name for it (None for a stream of the app's own, the API's)."""

    def __init__(self, live_id: str | None = None):
        self.live_id = live_id
        self._lock = threading.Lock()
        self._pieces: list[bytes] = []
        self._ended = False
        self._error: BaseException | None = None
        self._stop: Callable[[], object] | None = None
        self._gone = False  # the listener left before the end
        self._claimed = False  # a publisher took the id
        self._wake: Callable[[], None] = lambda: None
        self.listening = False

    # -- the publisher's side (the Gradio handler's thread) -------------------------------------------------
    def claim(self) -> None:
        """The publisher takes the id (once: every generation gets a new one)."""
        with self._lock:
            if self._claimed:
                raise LiveError("This live id was used already: every generation gets a new one.", 409)
            self._claimed = True
            self._wake()

    def attach(self, stop: Callable[[], object]) -> None:
        """`stop()` stops the generation: called when the listener goes away before the end (at once if it
        has gone already)."""
        with self._lock:
            self._stop, gone = stop, self._gone
        if gone:
            stop()

    def stop(self) -> None:
        """The page's Stop: the generation stops now or, when no handler has attached yet, as one attaches (the
        page's request for the samples may not even have reached the app)."""
        with self._lock:
            if self._ended:
                return
            self._gone, stop = True, self._stop
        if stop is not None:
            stop()

    def put(self, samples: np.ndarray) -> None:
        """The next int16 samples, sent on at once."""
        piece = np.ascontiguousarray(samples, dtype="<i2").tobytes()
        with self._lock:
            if self._ended or not piece:  # nothing after the end; no empty piece (a listener would wake for it)
                return
            self._pieces.append(piece)
            self._wake()  # under the lock: the listener's loop is still running

    def end(self, error: BaseException | None = None) -> None:
        """No more samples; with `error`, the reason the generation failed (the listener gets it)."""
        with self._lock:
            if self._ended:
                return
            self._ended, self._error = True, error
            self._wake()

    # -- the listener's side (the route, on the event loop) -------------------------------------------------
    async def pieces(self, claim_wait_s: float = CLAIM_WAIT_S) -> AsyncIterator[bytes]:
        """The samples as bytes (16-bit little-endian) as they are published, from the first; raises the
        publisher's error, LiveError 404 when no publisher takes the id in time. Closed before the end (the
        client went away), it stops the generation."""
        loop, changed = asyncio.get_running_loop(), asyncio.Event()
        with self._lock:
            self._wake = lambda: loop.call_soon_threadsafe(changed.set)  # from the publisher's thread
        deadline, finished = loop.time() + claim_wait_s, False
        try:
            while not self._claimed:
                changed.clear()
                if self._claimed:
                    break
                try:
                    await asyncio.wait_for(changed.wait(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    finished = True
                    raise LiveError("No generation took this live id: start one with Generate.", 404) from None
            while True:
                changed.clear()
                with self._lock:  # what was sent is let go: one listener
                    new, self._pieces, ended, error = self._pieces, [], self._ended, self._error
                for piece in new:
                    yield piece
                if ended:
                    finished = True
                    if error is not None:
                        raise error
                    return
                await changed.wait()
        finally:
            with self._lock:
                self._wake = lambda: None  # the loop may close now
                if not finished:
                    self._gone = True
                stop = None if finished else self._stop
            if stop is not None:
                stop()  # the client went away mid-stream: free the GPU


class LiveStreams:
    """The live ids of this app's generations."""

    def __init__(self, kept: int = KEPT_STREAMS):
        self._kept = kept
        self._streams: OrderedDict[str, LiveStream] = OrderedDict()
        self._lock = threading.Lock()

    def listen(self, live_id: str) -> LiveStream:
        """The stream of `live_id` for its one listener (the route)."""
        stream = self._stream(live_id)
        with self._lock:
            if stream.listening:
                raise LiveError("This live id is already being listened to.", 409)
            stream.listening = True
        return stream

    def stop(self, live_id: str) -> None:
        """Stop the generation the page asked for under `live_id`, begun or not (LiveStream.stop)."""
        self._stream(live_id).stop()

    @contextlib.contextmanager
    def publishing(self, live_id: str | None) -> Iterator[LiveStream | None]:
        """The stream the handler of `live_id` publishes into (None without an id: a client that does not
        listen live); it ends with the block, with the block's error if it raises."""
        if not live_id:
            yield None
            return
        stream = self._stream(live_id)
        stream.claim()
        try:
            yield stream
        except BaseException as err:  # GeneratorExit too: the page went away while its handler ran
            stream.end(err if isinstance(err, Exception) else Cancelled("The generation was closed."))
            raise
        stream.end()

    def _stream(self, live_id: str) -> LiveStream:
        if not isinstance(live_id, str) or not LIVE_ID.fullmatch(live_id):
            raise LiveError("A live id is 16-64 letters, digits, '-' or '_'.", 400)
        with self._lock:
            stream = self._streams.get(live_id)
            if stream is None:
                stream = self._streams[live_id] = LiveStream(live_id)
                while len(self._streams) > self._kept:
                    self._streams.popitem(last=False)
            self._streams.move_to_end(live_id)
            return stream
