"""Refuse requests that a web page on another site makes to this app (cross-site request forgery).

Gradio's strict CORS only stops such a page from *reading* responses; a plain form POST (an upload,
say) would still be carried out. A request that carries an Origin header naming another site and
would change something is answered 403 here. Same-page requests name this app's own address, and
API clients (gradio_client, curl) send no Origin at all.
"""
from __future__ import annotations

from urllib.parse import urlsplit

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class SameOriginOnly:
    """ASGI middleware: 403 for non-GET requests whose Origin differs from the Host they were sent to."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            origin = headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != headers.get("host"):
                await _forbidden(send)
                return
        await self.app(scope, receive, send)


async def _forbidden(send) -> None:
    body = b'{"detail": "Requests from other websites are not accepted."}'
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
