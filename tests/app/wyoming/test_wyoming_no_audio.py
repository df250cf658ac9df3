"""An engine that makes no audio for a text (no piece at all, or pieces without samples) still gets the `wyoming`
client a whole answer: audio-start and audio-stop with no audio-chunk between them, on a connection that goes on
answering. Stand-in engines on the real GPU worker and the real handler, served in this process."""
import asyncio
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from wyoming.client import AsyncTcpClient
from wyoming.server import AsyncTcpServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from app.settings import Settings
from app.worker import GpuWorker
from app.wyoming.handler import AnswerHandler, WyomingService

READ_TIMEOUT_S = 60  # generous: nothing here is timed, the wait only ends a broken test


class SilentEngine:
    """Speaks every text as `pieces` pieces of no samples (0: no piece at all); every clause as no samples."""

    mode, backend, is_demo = SimpleNamespace(value="hifi"), "stand-in", False

    def __init__(self, pieces: int):
        self.pieces = pieces

    def batch_key(self, config):
        return None

    def stream(self, text, voice=None, **options):
        for index in range(self.pieces):
            yield SimpleNamespace(audio=np.zeros(0, np.float32), index=index, verdict=None)

    def render(self, request, cancel=None):
        return [SimpleNamespace(audio=np.zeros(0, np.float32), tokens=torch.zeros((1, 8, 0), dtype=torch.long))]


def answers(engine, *requests) -> list[list[str]]:
    """The event types the server answered each request with, up to its last audio-stop or synthesize-stopped."""
    worker = GpuWorker(name="test-wyoming-no-audio")
    ctx = SimpleNamespace(host=SimpleNamespace(engine=engine), worker=worker, settings=Settings(), library=None,
                          history=SimpleNamespace(add=lambda *args, **meta: SimpleNamespace(id="stored")))

    async def ask():
        server = AsyncTcpServer("127.0.0.1", 0)
        await server.start(partial(AnswerHandler, service=WyomingService(ctx, version="test", seed=5,
                                                                         check_budget_ms=0)))
        port = server._server.sockets[0].getsockname()[1]
        heard = []
        try:
            async with AsyncTcpClient("127.0.0.1", port) as client:
                for events, last in requests:
                    for event in events:
                        await client.write_event(event.event())
                    kinds = []
                    while not kinds or kinds[-1] not in (last, "error"):
                        event = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
                        assert event is not None, f"the server hung up after {kinds}"
                        kinds.append(event.type)
                    heard.append(kinds)
        finally:
            await server.stop()
        return heard

    try:
        return asyncio.run(ask())
    finally:
        worker.shutdown()


@pytest.mark.parametrize("pieces", [0, 2])
def test_a_text_spoken_as_no_audio_is_answered_with_an_empty_audio_and_the_connection_goes_on(pieces):
    whole = ([Synthesize(text="Nothing to hear.")], "audio-stop")
    assert answers(SilentEngine(pieces), whole, whole) == [["audio-start", "audio-stop"]] * 2


def test_streamed_clauses_spoken_as_no_audio_are_each_an_empty_audio():
    stream = ([SynthesizeStart(), SynthesizeChunk(text="One. Two."), SynthesizeStop()], "synthesize-stopped")
    assert answers(SilentEngine(0), stream) == [["audio-start", "audio-stop"] * 2 + ["synthesize-stopped"]]
