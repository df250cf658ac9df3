"""Stop the jobs of a client that went away.

Gradio streams a session's results over one long response (`/queue/data?session_hash=...`). When the
client disconnects, Starlette cancels that response before Gradio's own disconnect check can run, so
Gradio goes on running the handler for nobody: a long generation kept the GPU for minutes and was
saved to the history. This middleware watches that response instead: a disconnect that arrives
before the response has ended cancels every job the session owns, as abandoned (nothing is kept).
"""
from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs

STREAM_PATH = "/queue/data"


class CancelOnDisconnect:
    """ASGI middleware: `abandon(session_hash)` when a session's result stream loses its client."""

    def __init__(self, app, abandon: Callable[[str], object]):
        self.app, self.abandon = app, abandon

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].endswith(STREAM_PATH):
            await self.app(scope, receive, send)
            return
        session = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash", [None])[0]
        ended = gone = False

        async def watched_send(message):
            nonlocal ended
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ended = True
            await send(message)

        async def watched_receive():
            nonlocal gone
            message = await receive()
            gone = gone or (message["type"] == "http.disconnect" and not ended)
            return message

        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            if gone and session:
                self.abandon(session)
