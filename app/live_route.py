"""`GET /live/stream/<live id>`: a generation's audio for the page that started it, as it is made (app/live.py).

The same bytes as the API's streaming `pcm` (`POST /v1/audio/speech`, docs/api.md): 16-bit little-endian
samples, 24 kHz mono, chunked, the response started by the first chunk, so that every error before it has
its own status and OpenAI's error body. One transport to keep fast; a streaming fetch, measured against a
WebSocket in docs/latency.md. `GET /live/worklet.js` is the page's player (app/assets/live_worklet.js).
"""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.constants import SAMPLE_RATE
from engine.errors import VoiceDeskError

from . import ASSETS
from .api.errors import ApiError
from .api.routes import as_api_error, rest_of, unless_disconnected
from .library import LibraryError
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
            return _error(err).response()
        return StreamingResponse(rest_of(first, pieces), media_type="audio/pcm",
                                 headers={**NO_STORE, "X-Sample-Rate": str(SAMPLE_RATE)})

    def worklet(request: Request) -> Response:
        return FileResponse(ASSETS / "live_worklet.js", media_type="text/javascript", headers=NO_STORE)

    return [Route(f"{PREFIX}/worklet.js", worklet), Route(f"{PREFIX}/stream/{{live_id}}", stream)]


def _error(err: Exception) -> ApiError:
    """The API's statuses, and the page's own: its live id, a saved voice that is not there. The handler that
    failed has reported its error already (the form's message line, a bug's traceback in the log)."""
    if isinstance(err, LiveError):
        return ApiError(err.status, str(err), code="live_id")
    if isinstance(err, LibraryError):
        return ApiError(404, str(err), code="voice_not_found")
    if isinstance(err, (ApiError, VoiceDeskError)):
        return as_api_error(err)
    return ApiError(500, f"The generation failed ({type(err).__name__}); the app's log has the details.")
