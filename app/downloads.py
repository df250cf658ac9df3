"""Downloads made when they are asked for, never stored: a result as WAV (its one stored file) or FLAC
(encoded from it on the fly), a saved voice as a .zip (built in memory), its reference clip to listen to.

Nothing here is copied into a cache or an export folder, so deleting a result or a voice deletes every way
to get it: these routes answer 404 from then on. They sit behind the same guard as the rest of the app.
"""
from __future__ import annotations

import soundfile as sf
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from .context import AppContext
from .history import HistoryError
from .library import LibraryError
from .storage import audio_bytes

PREFIX = "/download"
NO_STORE = {"Cache-Control": "no-store"}  # nor in the browser's cache: a deleted file must stay gone


def result_url(entry_id: str, fmt: str) -> str:
    """Where the page downloads a result (relative to the page, so a root path is kept)."""
    return f"{PREFIX.lstrip('/')}/history/{entry_id}.{fmt}"


def voice_archive_url(slug: str) -> str:
    return f"{PREFIX.lstrip('/')}/voices/{slug}.voicedesk.zip"


def voice_reference_url(slug: str) -> str:
    return f"{PREFIX.lstrip('/')}/voices/{slug}/reference.wav"


def download_routes(ctx: AppContext) -> list[Route]:
    def result(request: Request) -> Response:
        entry_id, _, fmt = request.path_params["name"].rpartition(".")
        try:
            entry = ctx.history.get(entry_id)
        except HistoryError:
            return _not_found()
        name = f"voicedesk-{entry.id}.{fmt}"
        if fmt == "wav":
            return FileResponse(entry.audio, media_type="audio/wav", filename=name, headers=NO_STORE)
        if fmt == "flac":
            samples, rate = sf.read(entry.audio, dtype="int16")
            return _attachment(audio_bytes(samples, rate, "FLAC"), "audio/flac", name)
        return _not_found()

    def voice_archive(request: Request) -> Response:
        slug = request.path_params["slug"]
        try:
            return _attachment(ctx.library.archive(slug), "application/zip", f"{slug}.voicedesk.zip")
        except LibraryError:
            return _not_found()

    def voice_reference(request: Request) -> Response:
        try:
            reference = ctx.library.entry(request.path_params["slug"]).reference
        except LibraryError:
            reference = None
        if reference is None:
            return _not_found()
        return FileResponse(reference, media_type="audio/wav", headers=NO_STORE, content_disposition_type="inline")

    return [Route(f"{PREFIX}/history/{{name}}", result),
            Route(f"{PREFIX}/voices/{{slug}}.voicedesk.zip", voice_archive),
            Route(f"{PREFIX}/voices/{{slug}}/reference.wav", voice_reference)]


def _attachment(body: bytes, media_type: str, filename: str) -> Response:
    return Response(body, media_type=media_type,
                    headers={**NO_STORE, "Content-Disposition": f'attachment; filename="{filename}"'})


def _not_found() -> Response:
    return Response("Not found (deleted, or never made).", status_code=404, headers=NO_STORE)
