"""Reading Wyoming events off a connection, with a reason for everything that is not one.

The `wyoming` package's own reader ends the connection without a word on a header that is not JSON and fails
with a KeyError on one without a type (and json's parser with a RecursionError on `[[[[...`, header or data); here
each becomes `MalformedEvent`, which the handler answers with an
`error` event before it closes. Lengths are bounded: a text event never needs more than a megabyte."""
from __future__ import annotations

import asyncio
import json

from wyoming.event import Event

MAX_BLOCK_BYTES = 2**20  # an event's data or payload: 50,000 characters of text are at most 200 kB in UTF-8


class MalformedEvent(Exception):
    """Bytes that are not a Wyoming event: the stream cannot be followed after them."""


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event, or None when the client closed or reset the connection (at or inside an event)."""
    try:
        line = await reader.readline()
    except ValueError:  # asyncio's limit on one line (64 KiB)
        raise MalformedEvent("An event's header line is over 64 KiB.") from None
    except ConnectionError:  # reset by the client: gone as surely as a close
        return None
    if not line:
        return None
    try:
        header = json.loads(line)
    except ValueError:
        raise MalformedEvent("An event's header line is not JSON.") from None
    except RecursionError:  # [[[[...]]]]: Python's parser gives up
        raise MalformedEvent("An event's header line is nested too deeply.") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise MalformedEvent("An event's header has no type.")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise MalformedEvent(f"The data of the '{header['type']}' event is not an object.")
    try:
        data_length, payload_length = _length(header, "data_length"), _length(header, "payload_length")
        if data_length:
            extra = json.loads(await reader.readexactly(data_length))
            if not isinstance(extra, dict):
                raise MalformedEvent(f"The data of the '{header['type']}' event is not an object.")
            data.update(extra)
        payload = await reader.readexactly(payload_length) if payload_length else None
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    except ValueError:  # json's errors, UnicodeDecodeError included
        raise MalformedEvent(f"The data of the '{header['type']}' event is not JSON.") from None
    except RecursionError:
        raise MalformedEvent(f"The data of the '{header['type']}' event is nested too deeply.") from None
    return Event(type=header["type"], data=data, payload=payload)


def _length(header: dict, key: str) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_BLOCK_BYTES:
        raise MalformedEvent(f"{key} must be a whole number of bytes from 0 to {MAX_BLOCK_BYTES:,}.")
    return value
