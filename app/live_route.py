"""`GET /live/stream/<live id>`: a generation's audio for the page that started it, as it is made (app/live.py).

The same bytes as the API's streaming `pcm` (`POST /v1/audio/speech`, docs/api.md): 16-bit little-endian
samples, 24 kHz mono, chunked, the response started by the first chunk, so that every error before it has
its own status and OpenAI's error body. One transport to keep fast; a streaming fetch, measured against a
WebSocket in docs/latency.md. `GET /live/worklet.js` is the page's player (app/assets/live_worklet.js).
"""
from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.constants import SAMPLE_RATE

from . import ASSETS
from .api.errors import ApiError
from .api.routes import as_api_error, unless_disconnected
from .live import LiveError, LiveStreams

PREFIX = "/live"
NO_STORE = {"Cache-Control": "no-store"}


def live_routes(streams: LiveStreams) -> list[Route]:
    async def stream(request: Request) -> Response:
        try:
            pieces = streams.listen(request.path_params["live_id"]).pieces()
            try:  # the client may go away while the voice is made or the job waits in line
                first = await unless_disconnected(request, anext(pieces))
            except BaseException:
                await pieces.aclose()  # stops the generation
                raise
        except StopAsyncIteration:  # ended before any audio (stopped early)
            first = b""
        except Exception as err:
            error = ApiError(err.status, str(err), code="live_id") if isinstance(err, LiveError) else as_api_error(err)
            return error.response()
        return StreamingResponse(_rest(first, pieces), media_type="audio/pcm",
                                 headers={**NO_STORE, "X-Sample-Rate": str(SAMPLE_RATE)})

    def worklet(request: Request) -> Response:
        return FileResponse(ASSETS / "live_worklet.js", media_type="text/javascript", headers=NO_STORE)

    return [Route(f"{PREFIX}/worklet.js", worklet), Route(f"{PREFIX}/stream/{{live_id}}", stream)]


async def _rest(first: bytes, pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        if first:
            yield first
        async for piece in pieces:
            yield piece
    finally:
        await pieces.aclose()  # a client gone mid-stream: the generation stops
