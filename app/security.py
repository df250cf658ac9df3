"""Only this computer's own page may use the app.

`LocalOnlyGuard` is an ASGI middleware that every route of the server (the Gradio UI and API, the
download routes, the OpenAI-compatible API) sits behind:

* DNS rebinding: a web page on attacker.example can make its name resolve to 127.0.0.1, and then its
  requests carry `Host: attacker.example:PORT` with a matching Origin, so an Origin check alone lets
  them through. Requests are answered only when the Host header names an address the app was bound
  to on purpose: a loopback name (127.0.0.1, localhost, [::1]) with the app's own port, or the
  address given with --host. Bound to every interface (0.0.0.0 / ::), any name is accepted: the
  user chose to be reachable from the network.
* Cross-site request forgery: Gradio's strict CORS only stops another site from *reading* answers;
  a plain form POST would still be carried out. A request that would change something (or opens a
  WebSocket, which any page may try: browsers apply no CORS to it) and carries
  an Origin other than the address it was sent to is refused. API clients send no Origin at all.
* Clickjacking: every answer says it may not be shown inside another site's frame.
"""
from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
ANY_INTERFACE = frozenset({"0.0.0.0", "::", ""})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FRAME_HEADERS = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"))


def allowed_hosts(bind_host: str) -> frozenset[str] | None:
    """The host names requests may carry when the server listens on `bind_host`; None means any."""
    if bind_host in ANY_INTERFACE:
        return None
    return LOOPBACK_HOSTS | {bind_host.strip("[]").lower()}


def guard_middleware(bind_host: str):
    """The guard as a Starlette `Middleware` for a server listening on `bind_host`."""
    from starlette.middleware import Middleware

    return Middleware(LocalOnlyGuard, hosts=allowed_hosts(bind_host))


def refusal(method: str, headers: dict[str, str], port: int | None, hosts: frozenset[str] | None) -> str | None:
    """Why a request must be refused, or None when it may pass.

    `headers` are the request's headers with lower-case names; `port` the port the server listens on.
    """
    host = headers.get("host", "")
    if hosts is not None and not _names_this_server(host, port, hosts):
        return "This address is not served here: open the app at http://127.0.0.1 or http://localhost."
    origin = headers.get("origin")
    if method not in SAFE_METHODS and origin is not None and urlsplit(origin).netloc.lower() != host.lower():
        return "Requests from other websites are not accepted."
    return None


class LocalOnlyGuard:
    """ASGI middleware: answers 403 to requests `refusal` turns down, and adds the anti-framing headers."""

    def __init__(self, app, hosts: frozenset[str] | None = LOOPBACK_HOSTS):
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        port = (scope.get("server") or (None, None))[1]
        # a WebSocket opens a two-way channel: another site's page may not open one (its Origin is checked)
        method = "WEBSOCKET" if scope["type"] == "websocket" else scope.get("method", "GET")
        reason = refusal(method, headers, port, self.hosts)
        if reason is not None:
            await _forbidden(scope, send, reason)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return

        async def send_with_frame_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *FRAME_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_frame_headers)


def _names_this_server(host: str, port: int | None, hosts: frozenset[str]) -> bool:
    try:
        parts = urlsplit(f"//{host}")
        name, host_port = (parts.hostname or "").lower(), parts.port
    except ValueError:  # a malformed port
        return False
    return name in hosts and (port is None or (host_port or 80) == port)


async def _forbidden(scope, send, reason: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = ('{"detail": "%s"}' % reason).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *FRAME_HEADERS]})
    await send({"type": "http.response.body", "body": body})
