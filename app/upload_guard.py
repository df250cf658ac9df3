"""An upload that cannot be stored (the disk is full, the folder read-only) is answered with the reason,
not a bare HTTP 500, and leaves no half-written file behind.

Gradio writes an upload into its upload folder as it arrives (`/upload`); when a write fails it neither
says why nor removes the part it wrote, so the disk stays full. This middleware does both: the page
shows "HTTP 507: The disk is full: ..." under the upload, and the space is given back.
"""
from __future__ import annotations

import logging
from pathlib import Path

from starlette.responses import PlainTextResponse

from engine.fileio import storage_error

UPLOAD_PATH = "/upload"
INSUFFICIENT_STORAGE = 507

log = logging.getLogger(__name__)


class UploadStorageGuard:
    """ASGI middleware for Gradio's upload route, whose partial files land directly in `upload_dir`."""

    def __init__(self, app, upload_dir: Path):
        self.app, self.upload_dir = app, Path(upload_dir)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith(UPLOAD_PATH):
            await self.app(scope, receive, send)
            return
        before = self._loose_files()
        started = False

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except OSError as err:
            if started:
                raise
            for partial in self._loose_files() - before:  # this upload's part-written file(s)
                partial.unlink(missing_ok=True)
            message = str(storage_error(self.upload_dir, err))
            log.warning("upload refused: %s", message)
            await PlainTextResponse(message, status_code=INSUFFICIENT_STORAGE)(scope, receive, send)

    def _loose_files(self) -> set[Path]:
        """Files directly in the upload folder: uploads still arriving (finished ones live in subfolders)."""
        try:
            return {p for p in self.upload_dir.iterdir() if p.is_file()}
        except OSError:
            return set()
