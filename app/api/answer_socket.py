"""`WS /v1/audio/answer`: text streamed in (a language model's deltas), speech streamed out, clause by clause as
each completes (app/answer.py), with an event per clause (its text, where its audio starts, how long it is) so a
client can caption. The protocol, its messages and close codes are in docs/api.md ("Streamed text").

Guarded like the API's other routes: the API must be on, the key (if one is set) comes as `Authorization: Bearer`
on the upgrade request, and app/security.py refuses another website's page (its Origin) before this runs. Every
refusal is an `error` message in OpenAI's shape, then a close with 4000 + the HTTP status the API would answer.
A client that goes away mid-answer stops the answer's GPU jobs, waiting or running.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from engine.checks.budget import DEFAULT_BUDGET_MS, MAX_BUDGET_MS
from engine.config import SETTING_RANGES
from engine.constants import SAMPLE_RATE
from engine.errors import VoiceDeskError
from engine.text.instruct import canonical_instruct
from engine.text.languages import resolve_language

from ..answer import AnswerTooLong, StreamedAnswer
from ..context import AppContext
from ..settings import MAX_PICKED_SEED, RANGES
from .access import ApiAccess
from .errors import ApiError
from .schemas import validated
from .speech import LANE, generation_config
from .voices import choose_voice

log = logging.getLogger(__name__)

PATH = "/v1/audio/answer"
NORMAL_CLOSE = 1000
UNSUPPORTED_DATA = 1003  # a binary message: the client sends text only
MAX_MESSAGE_BYTES = 2**20  # one message; the whole answer is held to MAX_TEXT_CHARS


class AnswerStart(BaseModel):
    """The first message: the voice and, as the speech API's body has them, VoiceDesk's choices (None: the
    app's saved setting)."""
    model_config = ConfigDict(strict=True, extra="forbid")

    type: Literal["start"]
    voice: str
    instructions: str | None = None
    language: str | None = None
    seed: int | None = Field(None, ge=0, le=MAX_PICKED_SEED)
    speed: float = Field(1.0, ge=SETTING_RANGES["speed"][1], le=SETTING_RANGES["speed"][2])
    steps: int | None = Field(None, ge=RANGES["steps"][0], le=RANGES["steps"][1])
    guidance: float | None = Field(None, ge=RANGES["guidance"][0], le=RANGES["guidance"][1])
    normalize: bool | None = None
    remove_pauses: bool | None = None
    check_budget_ms: int = Field(DEFAULT_BUDGET_MS, ge=0, le=MAX_BUDGET_MS)  # 0: no take checks for the answer


def answer_routes(ctx: AppContext, access: ApiAccess) -> list[BaseRoute]:
    async def endpoint(websocket: WebSocket) -> None:
        await AnswerSocket(websocket, ctx, access).run()

    return [WebSocketRoute(PATH, endpoint)]


class AnswerSocket:
    def __init__(self, websocket: WebSocket, ctx: AppContext, access: ApiAccess):
        self.ws, self.ctx, self.access = websocket, ctx, access

    async def run(self) -> None:
        await self.ws.accept()
        answer: StreamedAnswer | None = None
        speaking: asyncio.Task | None = None
        try:
            self.access.check(self.ctx.settings, self.ws.headers.get("authorization"))
            answer = self._answer(await self._message())
            await self.ws.send_json({"type": "started", "seed": answer.seed, "sample_rate": SAMPLE_RATE,
                                     "format": "pcm_s16le", "checks": answer.checks()})
            speaking = asyncio.create_task(self._speak(answer))
            await self._read_text(answer, speaking)
            await self._until_spoken(speaking)
        except WebSocketDisconnect:
            pass  # the client went away
        except Exception as err:  # never a traceback to the client: a bug's goes to the log
            await self._refuse(err)
        finally:
            # nothing left to make, or nobody left to hear it: free the GPU
            if answer is not None:
                answer.cancel()
            if speaking is not None and not speaking.done():
                speaking.cancel()
                await asyncio.gather(speaking, return_exceptions=True)

    def _answer(self, message: dict) -> StreamedAnswer:
        if message.get("type") != "start":
            raise ApiError(400, "The first message must be {\"type\": \"start\", \"voice\": ...}.", "type")
        start = validated(AnswerStart, message)
        chosen = choose_voice(self.ctx.library, start.voice, start.instructions)
        instruct = canonical_instruct(chosen.instruct)  # attributes the model knows, or TextInputError
        config = generation_config(self.ctx.settings, start, start.seed)
        return StreamedAnswer(self.ctx, replace(chosen, instruct=instruct),
                              language=resolve_language(start.language, strict=True), config=config, lane=LANE,
                              check_budget_ms=start.check_budget_ms)

    async def _read_text(self, answer: StreamedAnswer, speaking: asyncio.Task) -> None:
        """Text messages until `end` (the answer's clauses go to the GPU as they complete); a failed answer ends
        the reading too."""
        while True:
            receiving = asyncio.ensure_future(self._message())
            await asyncio.wait({receiving, speaking}, return_when=asyncio.FIRST_COMPLETED)
            if not receiving.done():  # the answer failed (or ended) before the client's next message
                receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
                speaking.result()
                return
            message = receiving.result()
            kind = message.get("type")
            if kind == "text":
                text = message.get("text")
                if not isinstance(text, str):
                    raise ApiError(400, "A text message is {\"type\": \"text\", \"text\": \"...\"}.", "text")
                answer.add(text)
            elif kind == "end":
                answer.finish()
                return
            else:
                raise ApiError(400, f"Unknown message type {kind!r}: send 'text' messages, then 'end'.", "type")

    async def _until_spoken(self, speaking: asyncio.Task) -> None:
        """After `end`: wait for the last clause, noticing a client that leaves meanwhile."""
        receiving = asyncio.ensure_future(self._message())
        await asyncio.wait({receiving, speaking}, return_when=asyncio.FIRST_COMPLETED)
        if receiving.done():
            receiving.result()  # a disconnect raises here
            raise ApiError(400, "The answer has ended: nothing more may be sent on this connection.", "type")
        receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)
        speaking.result()
        await self.ws.close(NORMAL_CLOSE)

    async def _speak(self, answer: StreamedAnswer) -> None:
        count, total = 0, 0.0
        async for clause in answer.clauses():
            await self.ws.send_json({"type": "clause", "index": clause.index, "text": clause.text,
                                     "start": round(clause.start_s, 6), "duration": round(clause.duration_s, 6),
                                     "timing": clause.timing(), **({"checks": clause.checks} if clause.checks else {})})
            await self.ws.send_bytes(clause.pcm.astype("<i2").tobytes())
            count, total = count + 1, clause.start_s + clause.duration_s
        await self.ws.send_json({"type": "done", "clauses": count, "duration": round(total, 6)})

    async def _message(self) -> dict:
        """The client's next message as a JSON object; raises WebSocketDisconnect when it has gone."""
        message = await self.ws.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        if message.get("bytes") is not None:
            raise ApiError(400, "Send text messages (JSON), not binary ones.", code="binary_message")
        data = message.get("text") or ""
        if len(data.encode()) > MAX_MESSAGE_BYTES:  # a text frame is UTF-8: its characters take 1 to 4 bytes
            raise ApiError(413, f"A message may hold at most {MAX_MESSAGE_BYTES:,} bytes.", code="message_too_long")
        try:
            parsed = json.loads(data)
        except ValueError:
            raise ApiError(400, "A message is not JSON.") from None
        except RecursionError:  # [[[[...]]]]: Python's parser gives up
            raise ApiError(400, "A message is not JSON (nested too deeply).") from None
        if not isinstance(parsed, dict):
            raise ApiError(400, "A message must be a JSON object with a 'type'.", "type")
        return parsed

    async def _refuse(self, err: Exception) -> None:
        from .routes import as_api_error

        error = ApiError(413, str(err), "text", "input_too_long") if isinstance(err, AnswerTooLong) else \
            as_api_error(err)
        if isinstance(err, (ApiError, VoiceDeskError)):
            log.info("API answer refused (%s): %s", error.status, error.message)
        if self.ws.application_state != WebSocketState.CONNECTED:
            return
        code = UNSUPPORTED_DATA if error.code == "binary_message" else 4000 + error.status
        try:
            await self.ws.send_json({"type": "error", **error.body()})
            await self.ws.close(code, reason=error.message.encode()[:120].decode(errors="ignore"))
        except (RuntimeError, WebSocketDisconnect):
            pass  # the client left meanwhile
