"""`voicedesk serve --wyoming`, launched as a user would, spoken to by the `wyoming` package's own client: what it
describes, audio equal to the engine's for the same text, streamed text spoken clause by clause as each completes
(order and content; never timing), and bad input answered with `error` events while the server lives on."""
import asyncio
import io
import json
import socket
import struct
from types import SimpleNamespace

import numpy as np
import pytest
from served import serving
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import async_read_event, write_event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from app.answer import CLOSED_EARLY
from app.library import VoiceLibrary
from app.settings import MAX_PICKED_SEED, Settings
from app.wyoming import server as wyoming_server
from app.wyoming.handler import LANE
from app.wyoming.server import checks_line, serve_wyoming
from engine import Engine
from engine.audio.pcm import to_int16
from engine.checks.budget import MAX_BUDGET_MS
from engine.constants import DEMO_MODEL
from engine.request import SpeechRequest
from engine.text.limits import MAX_TEXT_CHARS
from engine.voice import Voice

SEED = 11
STEPS = 4
READ_TIMEOUT_S = 240  # one event; generous: a loaded two-core machine speaks a clause in seconds
SAVED = "Grandpa Reading"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The launched server (port, folders, process, log): 4 steps a clause, seeded from SEED, one saved voice."""
    with serving(tmp_path_factory.mktemp("wyoming_home"), ["--wyoming", "--demo", "--seed", str(SEED)],
                 ready=lambda port, log: "The model is ready" in log, voice=SAVED,
                 settings=json.dumps({"steps": STEPS})) as server:
        yield server


@pytest.fixture(scope="module")
def engine():
    return Engine.load(DEMO_MODEL, device="cpu", mode="eager")


def config(seed: int):
    return Settings(steps=STEPS).generation_config(seed)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 600))


async def read_until(client, last: str) -> list:
    """Events up to the first of type `last` (or an error, or the connection's end)."""
    events = []
    while True:
        event = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
        if event is None:
            return events
        events.append(event)
        if event.type in (last, "error"):
            return events


async def exchange(port: int, *events, last: str) -> list:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event.event())
        return await read_until(client, last)


def audio_of(events) -> np.ndarray:
    return np.frombuffer(b"".join(AudioChunk.from_event(e).audio for e in events if e.type == "audio-chunk"), "<i2")


def clauses_of(events) -> list[np.ndarray]:
    """The audio between each audio-start and its audio-stop."""
    clauses, current = [], None
    for event in events:
        if event.type == "audio-start":
            current = []
        elif event.type == "audio-chunk":
            current.append(event)
        elif event.type == "audio-stop":
            clauses.append(audio_of(current))
            current = None
    return clauses


def test_describe_lists_the_saved_voices_and_the_presets(server):
    port, dirs, _, _ = server
    [event] = run(exchange(port, Describe(), last="info"))
    [program] = Info.from_event(event).tts
    assert program.name == "voicedesk" and program.supports_synthesize_streaming and program.installed
    voices = {v.name: v for v in program.voices}
    [entry] = VoiceLibrary.open(dirs).entries()
    assert voices[entry.slug].description == SAVED
    assert {"alloy", "onyx", "nova"} <= set(voices) and "designed" in voices["alloy"].description
    assert all({"en", "de", "zh"} <= set(v.languages) for v in voices.values())


def test_synthesize_answers_with_the_engines_audio(server, engine):
    port, dirs, _, _ = server
    text = "Good evening. The lights in the kitchen are off now."
    [entry] = VoiceLibrary.open(dirs).entries()
    events = run(exchange(port, Synthesize(text=text, voice=SynthesizeVoice(name=SAVED.lower())), last="audio-stop"))
    assert events[0].type == "audio-start" and events[-1].type == "audio-stop"
    assert {e.type for e in events[1:-1]} == {"audio-chunk"}
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    voice = VoiceLibrary.open(dirs).load_voice(entry.slug)
    expected = np.concatenate([to_int16(chunk.audio) for chunk in engine.stream(text, voice, config=config(SEED))])
    np.testing.assert_array_equal(audio_of(events), expected)


def test_two_clients_at_once_each_hear_their_own_text(server, engine):
    """Two connections asking at the same time share the one GPU worker: each gets its own text's audio, as the
    engine renders it alone (the automatic voice, seeded SEED), neither one's events on the other's connection."""
    port = server[0]
    texts = ["The first client asks for this sentence.", "A second client, at the same time, asks for another."]

    async def both():
        return await asyncio.gather(*(exchange(port, Synthesize(text=text), last="audio-stop") for text in texts))

    for text, events in zip(texts, run(both())):
        assert events[0].type == "audio-start" and events[-1].type == "audio-stop", [e.type for e in events]
        expected = np.concatenate([to_int16(chunk.audio) for chunk in engine.stream(text, config=config(SEED))])
        np.testing.assert_array_equal(audio_of(events), expected)


def test_streamed_text_is_spoken_clause_by_clause_as_each_completes(server, engine):
    """The first clause's audio arrives before the rest of the text is sent; each clause equals the engine's
    render of it, in the first clause's voice carried on (an automatic voice), seeded SEED + its index."""
    port, _, _, _ = server

    async def converse():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart().event())
            for token in ["Hello", " there", ".", " The"]:  # " The" shows the sentence has ended
                await client.write_event(SynthesizeChunk(text=token).event())
            first = await read_until(client, "audio-stop")  # a policy that waits for the stop never gets here
            for token in [" weather", " is", " fine", " today", "!", " Bye"]:
                await client.write_event(SynthesizeChunk(text=token).event())
            await client.write_event(Synthesize(text="Hello there. The weather is fine today! Bye").event())
            await client.write_event(SynthesizeStop().event())
            return first, await read_until(client, "synthesize-stopped")

    first, rest = run(converse())
    assert [e.type for e in first][0] == "audio-start" and first[-1].type == "audio-stop"
    assert rest[-1].type == "synthesize-stopped"
    assert [e.type for e in rest].count("audio-start") == 2  # the compatibility synthesize is not spoken again
    texts = ["Hello there.", "The weather is fine today!", "Bye"]
    voice, expected = None, []
    for index, text in enumerate(texts):
        result = engine.render(SpeechRequest(text=text, voice=voice, config=config(SEED + index)))[0]
        voice = voice or Voice.of_generated(result.tokens[0], text)
        expected.append(to_int16(result.audio))
    starts = [e.data for e in first + rest if e.type == "audio-start"]
    assert all(set(data["timing"]) == {"queue", "engine"} and data["timing"]["engine"] > 0 for data in starts)
    heard = clauses_of(first + rest)
    assert len(heard) == 3
    for clause, reference in zip(heard, expected):
        np.testing.assert_array_equal(clause, reference)


def test_requests_sent_while_a_stream_is_still_spoken_wait_their_turn(server):
    """A stream's synthesize-stop ends its text, not the connection's turn: a second stream and a synthesize sent
    right behind it (in one write, so the server reads them before the first clause can be spoken) are each
    answered after it, in order."""
    port = server[0]
    requests = [SynthesizeStart(), SynthesizeChunk(text="The first stream. It has two sentences."), SynthesizeStop(),
                SynthesizeStart(), SynthesizeChunk(text="The second stream."), SynthesizeStop(),
                Synthesize(text="A whole text.")]
    answers = ["audio-start", "audio-stop"] * 2 + ["synthesize-stopped"] + \
        ["audio-start", "audio-stop", "synthesize-stopped"] + ["audio-start", "audio-stop"]

    async def pipelined():
        framed = io.BytesIO()
        for request in requests:
            write_event(request.event(), framed)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(framed.getvalue())
        await writer.drain()
        kinds = []
        while len(kinds) < len(answers) and "error" not in kinds:
            event = await asyncio.wait_for(async_read_event(reader), READ_TIMEOUT_S)
            if event is None:
                break
            if event.type != "audio-chunk":
                kinds.append(event.type)
        writer.close()
        return kinds

    assert run(pipelined()) == answers


def error_of(events) -> Error:
    assert events and events[-1].type == "error", [e.type for e in events]
    return Error.from_event(events[-1])


@pytest.mark.parametrize("events, code", [
    ([Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody-here"))], "voice_not_found"),
    ([SynthesizeStart(voice=SynthesizeVoice(name="nobody-here"))], "voice_not_found"),
    ([Synthesize(text="x" * (MAX_TEXT_CHARS + 1))], "bad_text"),
    ([Synthesize(text="   ")], "bad_text"),
    ([SynthesizeStart(), SynthesizeChunk(text="y" * MAX_TEXT_CHARS), SynthesizeChunk(text="y")], "bad_text"),
    ([SynthesizeChunk(text="Hello.")], "no_stream"),
    ([SynthesizeStop()], "no_stream"),
    ([SynthesizeStart(), SynthesizeStart()], "stream_open"),
])
def test_bad_requests_get_error_events(server, events, code):
    port = server[0]
    assert error_of(run(exchange(port, *events, last="error"))).code == code


@pytest.mark.parametrize("raw", [
    b"this is not json\n",
    b'{"data": {"text": "no type"}}\n',
    b'{"type": "synthesize", "data": {}}\n',  # no text
    b'{"type": "synthesize", "data": {"text": "Hi.", "voice": 5}}\n',
    b'{"type": "synthesize", "data_length": 99999999}\n',
    b'{"type": "synthesize", "data_length": 5}\n[1,2]',
    b"x" * 70000 + b"\n",
    b"[" * 20000 + b"\n",  # nested past json's recursion limit, in a header under the line limit
    b'{"type": "synthesize", "data_length": 20000}\n' + b"[" * 20000,  # and in an event's data
])
def test_malformed_events_get_error_events(server, raw):
    port = server[0]

    async def send_raw():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(raw)
        await writer.drain()
        event = await asyncio.wait_for(async_read_event(reader), READ_TIMEOUT_S)
        closed = await asyncio.wait_for(reader.read(), READ_TIMEOUT_S) == b""  # then the server hangs up
        writer.close()
        return event, closed

    event, closed = run(send_raw())
    assert Error.from_event(event).code == "malformed_event" and closed


@pytest.mark.parametrize("leave", ["close", "reset"])
def test_a_client_that_leaves_mid_answer_frees_the_gpu_and_the_server_lives_on(server, leave):
    """A long text (about 70 pieces), left after its first audio (closed, or reset as a crashed client's
    connection is): its generation is stopped, as the server's log says (the worker found its job still to stop),
    the next request is answered (had it gone on, it would wait behind all of it), and no traceback is logged.
    Nothing here is timed: the text's length only makes it certain the job still runs when the client leaves
    (normalizing the text before its first audio costs seconds, the longest text's minutes on a loaded CPU)."""
    port, _, proc, log = server
    long_text = ("This sentence keeps the engine busy for a while, and then some more. " * 800)[:MAX_TEXT_CHARS // 5]

    async def leave_then_ask():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Synthesize(text=long_text).event())
            first = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
            assert first.type == "audio-start"
            if leave == "reset":  # closing with a zero linger sends a reset instead of a goodbye
                connection = client._writer.get_extra_info("socket")
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk(text="Next in line.").event())
            await client.write_event(SynthesizeStop().event())
            return await read_until(client, "synthesize-stopped")

    earlier = len(log.read_text())
    events = run(leave_then_ask())
    assert events[-1].type == "synthesize-stopped" and len(clauses_of(events)) == 1
    logged = log.read_text()[earlier:]  # written before the next answer could start (the loop's one thread)
    assert CLOSED_EARLY % LANE in logged, logged
    assert proc.poll() is None and "Traceback" not in log.read_text()


@pytest.mark.parametrize("mode, budget, says", [
    ("off", 250, "Take checks of streamed answers: off"),
    ("best_of_n", 0, "Take checks of streamed answers: off (--check-budget-ms 0)"),
    ("best_of_n", 250, "Take checks of streamed answers: best_of_n, within 250 ms a clause; off here: words (its "
                       "model whisper-somewhere is not on this computer)"),
])
def test_the_server_says_how_streamed_answers_are_checked(mode, budget, says):
    checks = SimpleNamespace(missing=lambda: {"words": SimpleNamespace(repo_id="whisper-somewhere")})
    ctx = SimpleNamespace(settings=Settings(check_mode=mode), checks=checks)
    assert checks_line(SimpleNamespace(ctx=ctx, check_budget_ms=budget)) == says


def test_a_check_budget_out_of_range_is_refused_before_anything_starts(capsys):
    assert serve_wyoming(check_budget_ms=MAX_BUDGET_MS + 1) == 2
    assert "--check-budget-ms" in capsys.readouterr().err


@pytest.mark.parametrize("seed, refused", [(-1, True), (0, False), (MAX_PICKED_SEED, False),
                                           (MAX_PICKED_SEED + 1, True)])
def test_a_seed_out_of_range_is_refused_before_anything_starts(seed, refused, capsys, tmp_path, monkeypatch):
    """Taken, a seed out of range made every request fail with the engine's refusal of it, as though the model were
    loading. The port asked for is taken, so a seed in range gets to the next check, which refuses the port."""
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))
    monkeypatch.setattr(wyoming_server, "configure_logging", lambda: None)  # the test session's logging stays
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_wyoming(seed=seed, port=port) == 2
    err = capsys.readouterr().err
    assert ("--seed must be from 0 to" in err) == refused and (str(port) in err) != refused, err
