"""The live path's meeting point (app/live.py) and its route: the page's request and the Gradio handler may
come in either order, the listener hears every sample from the first, the handler's errors reach it with
their status, and a listener that leaves stops the generation."""
import asyncio
import threading

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.api.routes import rest_of
from app.live import LiveError, LiveStreams
from app.live_route import live_routes
from engine.errors import TextInputError

ID = "0123456789abcdef0123"


def samples(n: int, start: int = 0) -> np.ndarray:
    return (np.arange(start, start + n) % 65536 - 32768).astype(np.int16)


async def collect(stream, claim_wait_s=5.0) -> bytes:
    return b"".join([piece async for piece in stream.pieces(claim_wait_s)])


def test_a_listener_that_comes_late_hears_the_generation_from_its_start():
    streams = LiveStreams()
    with streams.publishing(ID) as stream:
        stream.put(samples(100))
        stream.put(samples(50, 100))
    heard = asyncio.run(collect(streams.listen(ID)))
    assert np.array_equal(np.frombuffer(heard, "<i2"), samples(150))


def test_no_empty_piece_is_published_and_nothing_after_the_end():
    streams = LiveStreams()
    with streams.publishing(ID) as stream:
        stream.put(samples(0))
        stream.put(samples(10))
        stream.put(np.zeros(0, np.int16))
    stream.put(samples(5, 10))  # the stream has ended: dropped

    async def pieces():
        return [piece async for piece in streams.listen(ID).pieces(5.0)]

    heard = asyncio.run(pieces())
    assert [len(piece) for piece in heard] == [20]  # one piece of 10 samples, no empty one, nothing after the end


def test_a_listener_that_comes_first_gets_each_piece_as_it_is_published():
    streams = LiveStreams()
    published, got_first = threading.Event(), threading.Event()

    def handler():
        with streams.publishing(ID) as stream:
            stream.put(samples(10))
            published.set()
            assert got_first.wait(10)  # the first piece reached the listener before the handler went on
            stream.put(samples(5, 10))

    async def listen():
        pieces, received = streams.listen(ID).pieces(), []
        threading.Thread(target=handler).start()
        async for piece in pieces:
            received.append(piece)
            got_first.set()
        return received

    received = asyncio.run(listen())
    assert [len(p) for p in received] == [20, 10]
    assert np.array_equal(np.frombuffer(b"".join(received), "<i2"), samples(15))


def test_a_listener_that_leaves_stops_the_generation_even_before_it_began():
    streams, stopped = LiveStreams(), []

    async def leave_after_first_piece():
        pieces = streams.listen(ID).pieces()
        assert await anext(pieces)
        await pieces.aclose()

    with streams.publishing(ID) as stream:
        stream.attach(stop=lambda: stopped.append("mid-stream"))
        stream.put(samples(10))
        asyncio.run(leave_after_first_piece())
        assert stopped == ["mid-stream"]

    other = "abcdefabcdefabcdef"

    async def leave_at_once():
        pieces = streams.listen(other).pieces()
        waiting = asyncio.ensure_future(anext(pieces))
        await asyncio.sleep(0)  # it waits for a handler to take the id
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(leave_at_once())
    with streams.publishing(other) as stream:
        stream.attach(stop=lambda: stopped.append("before"))  # the listener has gone: stopped at once
    assert stopped == ["mid-stream", "before"]


def test_the_pages_stop_stops_the_generation_begun_or_not():
    """The page's Stop (app/ui/output.py) names the live id of its last Generate: on a busy computer it can come
    before the handler took the id and before the page's request for the samples reached the app (no listener to
    leave, no job to cancel yet); the generation stops as its handler attaches. Mid-stream it stops it then; after
    the end, nothing."""
    streams, stopped = LiveStreams(), []
    streams.stop(ID)
    with streams.publishing(ID) as stream:
        stream.attach(stop=lambda: stopped.append("before"))
    other = "abcdefabcdefabcdef"
    with streams.publishing(other) as stream:
        stream.attach(stop=lambda: stopped.append("mid-stream"))
        stream.put(samples(10))
        streams.stop(other)
    streams.stop(other)
    assert stopped == ["before", "mid-stream"]


def test_the_routes_body_closed_mid_stream_stops_the_generation():
    """The route's body (app/api/routes.rest_of, the API's too) closed after its first piece, as when the page
    goes away: the listener's pieces are closed with it, which stops the generation at once."""
    streams, stopped = LiveStreams(), []

    async def leave_after_first_piece():
        pieces = streams.listen(ID).pieces()
        body = rest_of(await anext(pieces), pieces)
        assert await anext(body)
        await body.aclose()
        return list(stopped)  # before asyncio.run closes what is left open

    with streams.publishing(ID) as stream:
        stream.attach(stop=lambda: stopped.append("mid-stream"))
        stream.put(samples(10))
        assert asyncio.run(leave_after_first_piece()) == ["mid-stream"]


def test_a_finished_listener_stops_nothing():
    streams, stopped = LiveStreams(), []
    with streams.publishing(ID) as stream:
        stream.attach(stop=lambda: stopped.append(True))
        stream.put(samples(10))
    asyncio.run(collect(streams.listen(ID)))
    assert stopped == []


def test_live_ids_are_checked():
    streams = LiveStreams()
    for bad in ("short", "../../etc/passwd-0123456789", "x" * 65):
        with pytest.raises(LiveError) as err:
            streams.listen(bad)
        assert err.value.status == 400
    streams.listen(ID)
    with pytest.raises(LiveError) as err:
        streams.listen(ID)
    assert err.value.status == 409
    with streams.publishing(ID):
        pass
    with pytest.raises(LiveError) as err, streams.publishing(ID):
        pass
    assert err.value.status == 409
    with pytest.raises(LiveError) as err:
        asyncio.run(collect(streams.listen("nobody-takes-this-id"), claim_wait_s=0.01))
    assert err.value.status == 404


@pytest.fixture
def route():
    streams = LiveStreams()
    with TestClient(Starlette(routes=live_routes(streams))) as client:
        yield streams, client


def test_the_route_sends_the_samples_as_the_apis_pcm(route):
    streams, client = route
    with streams.publishing(ID) as stream:
        stream.put(samples(300))
    answer = client.get(f"/live/stream/{ID}")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "audio/pcm"
    assert np.array_equal(np.frombuffer(answer.content, "<i2"), samples(300))


def test_the_handlers_error_reaches_the_route_with_its_status(route):
    streams, client = route
    with pytest.raises(TextInputError), streams.publishing(ID):
        raise TextInputError("The text is 60001 characters long; the limit is 50000.")
    answer = client.get(f"/live/stream/{ID}")
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "The text is 60001 characters long; the limit is 50000."
    bad = client.get("/live/stream/not-an-id")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "live_id"


def test_the_worklet_is_served(route):
    _, client = route
    answer = client.get("/live/worklet.js")
    assert answer.status_code == 200 and "registerProcessor" in answer.text
