"""Who may use the API: it is off unless switched on (the setting, `--api`, `voicedesk serve`); on a
loopback address anyone on this computer may call it; bound elsewhere it needs an API key, sent as
`Authorization: Bearer <key>`. The Host/Origin guard of app/security.py covers it like every other
route."""
from __future__ import annotations

import hmac
from dataclasses import dataclass

from ..security import LOOPBACK_HOSTS
from ..settings import Settings
from .errors import ApiError

KEY_ENV = "VOICEDESK_API_KEY"


@dataclass(frozen=True)
class ApiAccess:
    key: str | None  # None: no key asked for (loopback only)
    forced_on: bool  # started with --api or as `serve`

    def enabled(self, settings: Settings) -> bool:
        return self.forced_on or settings.api

    def check(self, settings: Settings, authorization: str | None) -> None:
        """Raise ApiError 404 while the API is off, 401 for a missing or wrong key."""
        if not self.enabled(settings):
            raise ApiError(404, "The API is off: switch it on in the app, or start it with --api.", code="api_off")
        if self.key is None:
            return
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.key.encode()):
            raise ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>' with the key the "
                                f"app was started with (--api-key or ${KEY_ENV}).", code="invalid_api_key")


def bind_refusal(host: str, key: str | None) -> str | None:
    """Why the app may not listen on `host`, or None: beyond loopback it needs a key (the page and the API ask
    for it: app/page_key.py)."""
    if host in LOOPBACK_HOSTS or key:
        return None
    return (f"The app would be reachable from other computers on {host}: set an API key (--api-key or "
            f"${KEY_ENV}), which the page and the API then ask for, or listen on 127.0.0.1.")
