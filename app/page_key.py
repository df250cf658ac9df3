"""Off this computer, the page asks for the key the API asks for.

Listening beyond loopback (`--host 0.0.0.0`), everything the page does (the page itself, Gradio's
endpoints that generate, save, import and delete voices and read the history, uploads, files) goes
through `PageKeyGuard`: a request passes with the key as `Authorization: Bearer <key>` (scripts,
gradio_client) or with the cookie that the key page sets once the person has typed the key. The
OpenAI-compatible API under /v1 answers its own 401 in OpenAI's shape (app/api/access.py).
"""
from __future__ import annotations

import hashlib
import hmac
import html
from urllib.parse import parse_qs

KEY_PAGE = "/voicedesk-key"
COOKIE = "voicedesk_key"
API_PREFIX = "/v1"
STARTUP = "/gradio_api/startup-events"  # Gradio's launch calls it without the key; it answers only True/False
MAX_FORM_BYTES = 4096


def cookie_value(key: str) -> str:
    """What the cookie holds: derived from the key, so the key itself is never stored in the browser."""
    return hmac.new(key.encode(), b"voicedesk page", hashlib.sha256).hexdigest()


def key_middleware(key: str):
    """The guard as a Starlette `Middleware`."""
    from starlette.middleware import Middleware

    return Middleware(PageKeyGuard, key=key)


class PageKeyGuard:
    """ASGI middleware: lets through requests that carry the key (or its cookie), serves the key page."""

    def __init__(self, app, key: str):
        self.app, self.key, self.cookie = app, key, cookie_value(key)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or _under(scope["path"], API_PREFIX) or scope["path"] == STARTUP:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == KEY_PAGE:
            await self._key_page(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self._carries_key(headers):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        elif scope.get("method") == "GET" and "text/html" in headers.get("accept", ""):
            await _answer(send, 303, b"", [(b"location", KEY_PAGE.encode())])
        else:
            await _answer(send, 401, b'{"detail": "Type the key on the page first (or send it as '
                                     b"'Authorization: Bearer <key>')\"}", [(b"content-type", b"application/json")])

    def _carries_key(self, headers: dict[str, str]) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.key.encode()):
            return True
        cookies = dict(part.strip().partition("=")[::2] for part in headers.get("cookie", "").split(";"))
        return hmac.compare_digest(cookies.get(COOKIE, "").encode(), self.cookie.encode())

    async def _key_page(self, scope, receive, send) -> None:
        if scope.get("method") != "POST":
            await _answer(send, 200, _page(""), [(b"content-type", b"text/html; charset=utf-8")])
            return
        form = parse_qs((await _body(receive)).decode("utf-8", "replace"))
        given = (form.get("key") or [""])[0]
        if not hmac.compare_digest(given.encode(), self.key.encode()):
            await _answer(send, 401, _page("That is not the key this app was started with."),
                          [(b"content-type", b"text/html; charset=utf-8")])
            return
        cookie = f"{COOKIE}={self.cookie}; Path=/; HttpOnly; SameSite=Strict"
        await _answer(send, 303, b"", [(b"location", b"/"), (b"set-cookie", cookie.encode())])


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


async def _body(receive) -> bytes:
    body = b""
    while len(body) <= MAX_FORM_BYTES:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    return body[:MAX_FORM_BYTES]


async def _answer(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


def _page(problem: str) -> bytes:
    said = f'<p class="problem" role="alert">{html.escape(problem)}</p>' if problem else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>VoiceDesk: key</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;max-width:28rem;margin:15vh auto;padding:0 1rem;color-scheme:light dark}}
input{{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin:.5rem 0}}
button{{font:inherit;padding:.5rem 1.2rem}}.problem{{color:#c62828}}</style></head><body>
<h1>VoiceDesk</h1><p>This app is reachable from the network, so it asks for its key: the one it was started
with (<code>--api-key</code> or <code>$VOICEDESK_API_KEY</code>).</p>{said}
<form method="post" action="{KEY_PAGE}"><label for="key">Key</label>
<input id="key" name="key" type="password" autocomplete="current-password" autofocus required>
<button type="submit">Open VoiceDesk</button></form></body></html>""".encode()
