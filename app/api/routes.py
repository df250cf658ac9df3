"""The API's HTTP routes. Each answers in OpenAI's shapes: audio bytes (chunked) or server-sent events
`speech.audio.delta` / `speech.audio.done` for speech, lists for voices and models, and
`{"error": ...}` with OpenAI's status for anything refused. The response starts when the first
chunk is encoded, so every error before it has its own status; the generation is cancelled (and
the GPU freed) as soon as the client disconnects, whether it is still waiting or already listening."""
from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, compile_path

from engine.errors import (
    AudioInputError,
    Cancelled,
    SettingError,
    TextInputError,
    TranscriptRequiredError,
    VoiceDeskError,
)

from ..context import AppContext
from .access import ApiAccess
from .errors import ApiError
from .schemas import MODELS, parse_speech
from .speech import SpeechStream
from .voices import list_voices

log = logging.getLogger(__name__)


def api_routes(ctx: AppContext, access: ApiAccess) -> list[BaseRoute]:
    router = APIRouter()

    def checked(handler: Callable[[Request], Awaitable[Response]]):
        async def route(request: Request) -> Response:
            try:
                access.check(ctx.settings, request.headers.get("authorization"))
                return await handler(request)
            except Exception as err:  # never a traceback to the client: a bug's goes to the log
                error = as_api_error(err)
                # the client's mistake: one line in the log; one that left has nobody to answer (stop_early logged
                # CLOSED_EARLY for its generation)
                if isinstance(err, (ApiError, VoiceDeskError)) and not isinstance(err, ClientGone):
                    log.info("API %s refused (%s): %s", request.url.path, error.status, error.message)
                return error.response()
        return route

    async def speech(request: Request) -> Response:
        received_at = time.time()
        try:
            body = parse_speech(await request.json())
        except ValueError as err:  # not JSON
            raise ApiError(400, f"The body is not valid JSON ({err}).") from err
        except RecursionError as err:  # [[[[...]]]]: Python's parser gives up
            raise ApiError(400, "The body is not valid JSON (nested too deeply).") from err
        stream = await anyio.to_thread.run_sync(SpeechStream, ctx, body, ctx.settings.api_max_waiting)
        pieces = stream.audio()
        try:
            first = await unless_disconnected(request, anext(pieces))
        except BaseException:
            await pieces.aclose()  # stops the generation
            raise
        headers = {"X-VoiceDesk-Seed": str(stream.seed), "Server-Timing": stream.server_timing(received_at)}
        if body.stream_format == "sse":
            return StreamingResponse(_sse(stream, first, pieces), media_type="text/event-stream", headers=headers)
        return StreamingResponse(_audio(first, pieces), media_type=stream.encoder.content_type, headers=headers)

    async def voices(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": await anyio.to_thread.run_sync(list_voices, ctx.library)})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_object(m) for m in MODELS]})

    async def model(request: Request) -> Response:
        """OpenAI's "retrieve model" (the openai client's models.retrieve)."""
        name = request.path_params["model"]
        if name not in MODELS:
            raise ApiError(404, f"The model '{name}' does not exist: use one of {', '.join(MODELS)}.", "model",
                           code="model_not_found")
        return JSONResponse(_model_object(name))

    endpoints = {"/v1/audio/speech": ("POST", speech), "/v1/audio/voices": ("GET", voices),
                 "/v1/models": ("GET", models), "/v1/models/{model}": ("GET", model)}

    patterns = {known: compile_path(known)[0] for known in endpoints}  # "/v1/models/{model}" holds any id

    async def elsewhere(request: Request) -> Response:
        """Any other method or path under /v1 is refused in OpenAI's shape too (FastAPI's own is {"detail"})."""
        path = request.url.path
        if known := next((known for known, pattern in patterns.items() if pattern.match(path)), None):
            method = endpoints[known][0]
            raise ApiError(405, f"{path} takes {method}, not {request.method}.", code="method_not_allowed",
                           headers={"Allow": method})
        offered = ", ".join(f"{method} {known}" for known, (method, _) in endpoints.items())
        raise ApiError(404, f"There is no {request.method} {path}: the API offers {offered}.", code="not_found")

    for path, (method, handler) in endpoints.items():
        router.add_api_route(path, checked(handler), methods=[method], include_in_schema=False)
    router.add_api_route("/v1/{rest:path}", checked(elsewhere), include_in_schema=False,
                         methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])  # after the others
    return router.routes


def _model_object(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "voicedesk"}


class ClientGone(Cancelled):
    """The client disconnected before its response started."""


async def unless_disconnected(request: Request, awaitable):
    """The awaitable's result, or raise ClientGone when the client disconnects first."""
    outcome: dict = {}

    async def run(scope):
        try:
            outcome["value"] = await awaitable
        except Exception as err:
            outcome["error"] = err
        scope.cancel()

    async def watch(scope):
        while (await request.receive())["type"] != "http.disconnect":
            pass
        outcome["error"] = ClientGone("The client disconnected.")
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, group.cancel_scope)
        group.start_soon(watch, group.cancel_scope)
    if "value" in outcome:
        return outcome["value"]
    raise outcome["error"]


async def rest_of(first: bytes, pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A response's body: `first` (awaited before the response started), then the other pieces; empty ones are
    passed over. Closed early, it closes `pieces`."""
    try:
        if first:
            yield first
        async for piece in pieces:
            if piece:
                yield piece
    finally:
        await pieces.aclose()  # the client went away: the generation stops, the GPU is freed


async def _audio(first: bytes, pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        async for piece in rest_of(first, pieces):
            yield piece
    except Exception as err:  # the status is sent: end the body unfinished, so the client sees it broke
        log.warning("API speech stream failed after it started: %s", as_api_error(err).message)
        raise


async def _sse(stream: SpeechStream, first: bytes, pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        async for piece in rest_of(first, pieces):
            yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode()})
    except Exception as err:
        yield _event({"type": "error", **as_api_error(err).body()})
        return
    checks = stream.checks()  # VoiceDesk's take checks, beside OpenAI's fields (clients ignore extra keys)
    yield _event({"type": "speech.audio.done", "usage": stream.usage(), **({"checks": checks} if checks else {})})


def _event(data: dict) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def as_api_error(err: Exception) -> ApiError:
    if isinstance(err, ApiError):
        return err
    if isinstance(err, (TextInputError, AudioInputError, TranscriptRequiredError, SettingError)):
        return ApiError(400, str(err))
    if isinstance(err, Cancelled):
        return ApiError(503, str(err), code="cancelled")
    if isinstance(err, VoiceDeskError):
        return ApiError(503, str(err))
    log.exception("API request failed", exc_info=err)
    return ApiError(500, f"The server failed ({type(err).__name__}); the app's log has the details.")
