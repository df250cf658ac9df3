"""One Wyoming connection: `describe` -> `info`; `synthesize` -> audio-start, audio-chunk..., audio-stop as the
engine makes the audio; streamed text (synthesize-start, synthesize-chunk..., synthesize-stop) -> each clause's
audio-start, audio-chunk..., audio-stop as soon as it is spoken, then synthesize-stopped. A `synthesize` inside
a stream (before its synthesize-stop) is the full text sent for older servers: ignored, as the protocol asks. Other
events are dropped.

Everything wrong gets an `error` event (text, code) and the connection is closed, with the answer's GPU jobs
stopped; so does a client that goes away mid-answer. Requests of one connection are answered one after another:
one sent while the answer before it is still spoken (a stream's synthesize-stop ends only its text) waits for it.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.server import AsyncEventHandler
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from engine.checks.budget import DEFAULT_BUDGET_MS
from engine.constants import SAMPLE_RATE
from engine.errors import TextInputError, VoiceDeskError
from engine.text.clean import require_text
from engine.text.limits import MAX_TEXT_CHARS, check_length

from ..answer import StreamedAnswer, speak_whole
from ..context import AppContext
from .framing import MalformedEvent, read_event
from .voices import UnknownVoice, chosen_voice, describe, language_hint

log = logging.getLogger(__name__)

LANE = "wyoming"  # Wyoming's answers take turns with the app's users and the API on the one GPU worker
SAMPLES_PER_CHUNK = 1024  # one audio-chunk event (43 ms), as Wyoming's own servers send
WIDTH, CHANNELS = 2, 1  # 16-bit mono


@dataclass(frozen=True)
class WyomingService:
    ctx: AppContext
    version: str
    seed: int | None  # every answer seeded from it (clause i: seed + i); None: a random seed per answer
    check_budget_ms: int = DEFAULT_BUDGET_MS  # what take checks may add to a streamed clause (0: none)


class Refused(Exception):
    def __init__(self, text: str, code: str):
        super().__init__(text)
        self.text, self.code = text, code


class AnswerHandler(AsyncEventHandler):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, service: WyomingService):
        super().__init__(reader, writer)
        self.service, self.ctx = service, service.ctx
        self._answer: StreamedAnswer | None = None  # the text stream being received (until its synthesize-stop)
        self._speaking: asyncio.Task | None = None  # writes the current answer's audio

    async def run(self) -> None:
        """Read events until the client goes away or something is refused (the package's own loop, with a
        reason given for bytes that are no event)."""
        try:
            while True:
                try:
                    event = await read_event(self.reader)
                except MalformedEvent as err:
                    await self._refuse(Refused(str(err), "malformed_event"))
                    break
                if event is None or not await self.handle_event(event):
                    break
        finally:
            await self.disconnect()
            self.writer.close()

    async def disconnect(self) -> None:
        """The client went away or was refused: the answer's GPU jobs stop, waiting or running."""
        if self._answer is not None:
            self._answer.cancel()
        if self._speaking is not None and not self._speaking.done():
            self._speaking.cancel()
            await asyncio.gather(self._speaking, return_exceptions=True)

    async def handle_event(self, event: Event) -> bool:
        try:
            await self._handle(event)
            return True
        except Refused as err:
            await self._refuse(err)
        except UnknownVoice as err:
            await self._refuse(Refused(str(err), "voice_not_found"))
        except TextInputError as err:
            await self._refuse(Refused(str(err), "bad_text"))
        except VoiceDeskError as err:  # the model is still loading, or could not be loaded
            await self._refuse(Refused(str(err), "not_ready"))
        except (KeyError, TypeError, AttributeError) as err:  # an event without the fields its type has
            await self._refuse(Refused(f"The '{event.type}' event is not well formed ({type(err).__name__}: "
                                       f"{err}).", "malformed_event"))
        return False

    async def _handle(self, event: Event) -> None:
        if Describe.is_type(event.type):
            await self.write_event(describe(self.ctx.library, self.service.version).event())
        elif SynthesizeStart.is_type(event.type):
            await self._one_at_a_time()
            start = SynthesizeStart.from_event(event)
            voice = start.voice
            self._answer = StreamedAnswer(self.ctx, chosen_voice(self.ctx.library, voice and voice.name),
                                          language=language_hint(voice and voice.language),
                                          config=self.ctx.settings.generation_config(self.service.seed), lane=LANE,
                                          check_budget_ms=self.service.check_budget_ms)
            self._speaking = asyncio.create_task(self._speak_stream(self._answer))
        elif SynthesizeChunk.is_type(event.type):
            self._streaming(event).add(SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type):
            self._streaming(event).finish()
            self._answer = None  # its text is complete: what comes next is a new request, which waits for it
        elif Synthesize.is_type(event.type) and self._answer is None:  # inside a stream it only repeats the text
            await self._one_at_a_time()
            synthesize = Synthesize.from_event(event)
            text, voice = synthesize.text, synthesize.voice
            require_text(text)
            check_length(text, MAX_TEXT_CHARS, "text")
            chosen = chosen_voice(self.ctx.library, voice and voice.name)
            self.ctx.host.engine  # noqa: B018 -- raises VoiceDeskError while the model loads: said before queueing
            pieces = speak_whole(self.ctx, chosen, text, language=language_hint(voice and voice.language),
                                 config=self.ctx.settings.generation_config(self.service.seed), lane=LANE)
            self._speaking = asyncio.create_task(self._speak_whole(pieces))

    def _streaming(self, event: Event) -> StreamedAnswer:
        if self._answer is None:
            raise Refused(f"'{event.type}' came outside a text stream: send synthesize-start first.", "no_stream")
        return self._answer

    async def _one_at_a_time(self) -> None:
        """A new request waits for the answer before it to be spoken."""
        if self._answer is not None:
            raise Refused("A text stream is open: end it with synthesize-stop first.", "stream_open")
        if self._speaking is not None:
            await asyncio.gather(self._speaking, return_exceptions=True)

    async def _speak_stream(self, answer: StreamedAnswer) -> None:
        try:
            async for clause in answer.clauses():
                await self._write_audio(clause.pcm.tobytes(), start=True, stop=True,
                                        extra={"timing": clause.timing(), **({"checks": clause.checks}
                                                                             if clause.checks else {})})
            await self.write_event(SynthesizeStopped().event())
        except Exception as err:
            await self._fail(err)
        finally:
            answer.cancel()
            self._answer = None

    async def _speak_whole(self, pieces) -> None:
        started = False
        try:
            async for pcm in pieces:
                await self._write_audio(pcm.tobytes(), start=not started, stop=False)
                started = True
            await self._write_audio(b"", start=not started, stop=True)  # a text spoken as no audio: start, stop
        except Exception as err:
            await self._fail(err)
        finally:
            await pieces.aclose()

    async def _write_audio(self, audio: bytes, *, start: bool, stop: bool, extra: dict | None = None) -> None:
        """`extra` (a clause's timing: queue and engine ms; its take's checks) rides in audio-start's data, which
        clients read by name."""
        fmt = {"rate": SAMPLE_RATE, "width": WIDTH, "channels": CHANNELS}
        if start:
            event = AudioStart(**fmt).event()
            event.data.update(extra or {})
            await self.write_event(event)
        step = SAMPLES_PER_CHUNK * WIDTH * CHANNELS
        for offset in range(0, len(audio), step):
            await self.write_event(AudioChunk(audio=audio[offset:offset + step], **fmt).event())
        if stop:
            await self.write_event(AudioStop().event())

    async def _fail(self, err: Exception) -> None:
        """An answer failed after it was accepted: say why, then close (its jobs are stopped)."""
        if isinstance(err, ConnectionError):
            return  # the client went away: nobody to tell
        if isinstance(err, TextInputError):
            refused = Refused(str(err), "bad_text")
        elif isinstance(err, VoiceDeskError):
            refused = Refused(str(err), "failed")
        else:
            log.exception("a Wyoming answer failed", exc_info=err)
            refused = Refused(f"The server failed ({type(err).__name__}); its log has the details.", "failed")
        await self._refuse(refused)
        await self.stop()

    async def _refuse(self, refused: Refused) -> None:
        log.info("Wyoming request refused (%s): %s", refused.code, refused.text)
        try:
            await self.write_event(Error(text=refused.text, code=refused.code).event())
        except ConnectionError:
            pass  # the client is gone already
