"""Streamed text to first audio: from the arrival of a clause's last character to its first audio at the client,
for the Wyoming server and the API's WebSocket, beside the engine's own time for that clause.

    python -m tools.bench_answer [--demo | --model PATH] [--mode hifi] [--runs 3] [--steps N]

Starts `launcher.py serve --wyoming` and then `launcher.py serve` in a throwaway data folder (one at a time, so
they never share the device).

- clause latency: each sentence is sent in tokens of 4 characters; its last token (the full stop) is sent, one
  token time later (30 tokens/s) the next sentence's first token; meanwhile the client waits for that clause's
  first audio. Reported from the last character and from the token after it (negative when the audio came
  first), beside the server's own figures for the clause (its `timing`: waiting for the GPU, the engine's time).
- answer: a 10-sentence answer streamed at 30 tokens/s: first audio after the first clause's last character,
  and the longest gap a listener hears after the first clause (audio played as it arrives, each clause after
  the one before).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tools.bench_server import Server
from tools.model_options import add_model_options, model_options

TOKEN_S = 1 / 30  # a language model writing 30 tokens a second
SENTENCES = ["The kitchen lights are off now.", "Tomorrow will be sunny and warm.",
             "Your next meeting starts at ten.", "The front door is locked.", "I have set a timer for you."]
ANSWER = " ".join(["The living room is at twenty one degrees.", "The heating will switch off at eleven.",
                   "All windows are closed.", "The garage door is open.", "I can close it if you like.",
                   "Tomorrow brings light rain in the morning.", "It clears up by noon.",
                   "Take an umbrella when you leave.", "Your parcel arrives on Friday.", "Have a good evening."])
SEED = 0


def tokens(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


# -- the two protocols, one shape: start(), send(text), end(), and events (kind, clause index) -------------------
class WyomingClient:
    def __init__(self, port: int):
        from wyoming.client import AsyncTcpClient

        self.client = AsyncTcpClient("127.0.0.1", port)
        self.clause = -1

    async def start(self) -> None:
        from wyoming.tts import SynthesizeStart

        await self.client.connect()
        await self.client.write_event(SynthesizeStart().event())

    async def send(self, text: str) -> None:
        from wyoming.tts import SynthesizeChunk

        await self.client.write_event(SynthesizeChunk(text=text).event())

    async def end(self) -> None:
        from wyoming.tts import SynthesizeStop

        await self.client.write_event(SynthesizeStop().event())

    async def event(self) -> tuple[str, int, float]:
        """("audio", clause index, seconds of audio) | ("clause-end", index, 0) | ("done", -1, 0)."""
        while True:
            event = await self.client.read_event()
            if event is None or event.type == "error":
                raise RuntimeError(f"the server answered {event}")
            if event.type == "audio-start":
                self.clause += 1
                self.timing = event.data["timing"]
            elif event.type == "audio-chunk":
                return "audio", self.clause, len(event.payload) / 2 / 24000
            elif event.type == "audio-stop":
                return "clause-end", self.clause, 0.0
            elif event.type == "synthesize-stopped":
                await self.client.disconnect()
                return "done", -1, 0.0


class SocketClient:
    def __init__(self, port: int, steps: int | None):
        self.url, self.steps, self.clause = f"ws://127.0.0.1:{port}/v1/audio/answer", steps, -1
        self.ended = True  # a clause's audio is one message: its end follows it

    async def start(self) -> None:
        from websockets.asyncio.client import connect

        self.ws = await connect(self.url, max_size=None)
        start = {"type": "start", "voice": "alloy", "seed": SEED, **({"steps": self.steps} if self.steps else {})}
        await self.ws.send(json.dumps(start))
        assert json.loads(await self.ws.recv())["type"] == "started"

    async def send(self, text: str) -> None:
        await self.ws.send(json.dumps({"type": "text", "text": text}))

    async def end(self) -> None:
        await self.ws.send(json.dumps({"type": "end"}))

    async def event(self) -> tuple[str, int, float]:
        if not self.ended:
            self.ended = True
            return "clause-end", self.clause, 0.0
        message = await self.ws.recv()
        if isinstance(message, bytes):
            self.ended = False
            return "audio", self.clause, len(message) / 2 / 24000
        data = json.loads(message)
        if data["type"] == "clause":
            self.clause, self.timing = data["index"], data["timing"]
            return await self.event()
        if data["type"] == "done":
            await self.ws.close()
            return "done", -1, 0.0
        raise RuntimeError(f"the server answered {data}")


async def clause_latency(client) -> list[tuple[float, float, float, float]]:
    """Per sentence, seconds: first audio after its last character, after the token that follows it (negative:
    the audio came before that token), and the server's own figures for the clause (waiting for the GPU, the
    engine's time). The next token is sent one token time after the last one while the client already waits."""
    await client.start()
    rows = []
    pending = tokens(SENTENCES[0])
    for index in range(len(SENTENCES)):
        for token in pending:
            await client.send(token)
        marked = time.perf_counter()
        following = tokens(" " + SENTENCES[index + 1]) if index + 1 < len(SENTENCES) else []

        async def next_token(first: str | None) -> float:
            await asyncio.sleep(TOKEN_S)
            await (client.send(first) if first is not None else client.end())
            return time.perf_counter()

        confirming = asyncio.create_task(next_token(following[0] if following else None))
        while (await client.event())[0] != "audio":
            pass
        heard = time.perf_counter()
        confirmed = await confirming
        rows.append((heard - marked, heard - confirmed, client.timing["queue"] / 1e3, client.timing["engine"] / 1e3))
        while (await client.event())[0] != "clause-end":
            pass
        pending = following[1:]
    while (await client.event())[0] != "done":
        pass
    return rows


async def answer_flow(client) -> tuple[float, float]:
    """(first audio after the first clause's last character, longest gap heard after the first clause)."""
    await client.start()
    first_mark = len(ANSWER.split(".")[0]) + 1  # the first sentence's full stop
    sent_mark: list[float] = []

    async def write():
        sent = 0
        for token in tokens(ANSWER):
            await client.send(token)
            sent += len(token)
            if sent >= first_mark and not sent_mark:
                sent_mark.append(time.perf_counter())
            await asyncio.sleep(TOKEN_S)
        await client.end()

    writer = asyncio.create_task(write())
    arrivals = []  # (time, clause, seconds of audio)
    while (event := await client.event())[0] != "done":
        if event[0] == "audio":
            arrivals.append((time.perf_counter(), event[1], event[2]))
    await writer
    playing_until, gaps = None, []
    for at, clause, seconds in arrivals:  # audio plays as it arrives, each piece after the one before
        if playing_until is None:
            playing_until = at
        elif at > playing_until and clause > 0:
            gaps.append(at - playing_until)
        playing_until = max(playing_until, at) + seconds
    return arrivals[0][0] - sent_mark[0], max(gaps, default=0.0)


def answer_speech(url: str, steps: int | None) -> None:
    """One short speech request, raising httpx.HTTPError until the server answers it (its model loaded)."""
    body = {"model": "tts-1", "input": "Hi.", "voice": "alloy", "response_format": "pcm",
            **({"steps": steps} if steps else {})}
    httpx.post(f"{url}/v1/audio/speech", json=body, timeout=600).raise_for_status()


def measure(client_factory, runs: int) -> dict:
    rows = [asyncio.run(clause_latency(client_factory())) for _ in range(runs + 1)][1:]  # the first warms up
    flows = [asyncio.run(answer_flow(client_factory())) for _ in range(runs)]
    return {"from_last_char": [r[0] for run in rows for r in run],
            "from_next_token": [r[1] for run in rows for r in run], "queue": [r[2] for run in rows for r in run],
            "engine": [r[3] for run in rows for r in run],
            "answer_first_audio": [f[0] for f in flows], "answer_max_gap": [f[1] for f in flows]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, help="diffusion steps (default: the app's setting, 32)")
    parser.add_argument("--json", help="also write the raw figures here")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="bench-answer-"))
    (home / "config").mkdir()
    (home / "config" / "settings.json").write_text(json.dumps({"steps": args.steps} if args.steps else {}))
    results = {}
    with Server(home, ["--wyoming", "--seed", str(SEED), *model_options(args)]) as server:
        server.says("The model is ready")
        results["wyoming"] = measure(lambda: WyomingClient(server.port), args.runs)
    if args.json:  # kept as each protocol finishes
        Path(args.json).write_text(json.dumps(results, indent=1))
    with Server(home, model_options(args)) as server:
        server.says("VoiceDesk API is running")
        server.until(lambda: answer_speech(server.url, args.steps))  # the model loads after the server listens
        results["websocket"] = measure(lambda: SocketClient(server.port, args.steps), args.runs)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    median = statistics.median
    print(f"mode {args.mode}, {'demo model' if args.demo else args.model}, steps {args.steps or 'setting'}, "
          f"{args.runs} runs x {len(SENTENCES)} clauses; medians in ms (p90 in brackets)")
    for name in ("wyoming", "websocket"):
        r = {key: [1e3 * v for v in values] for key, values in results[name].items()}  # ms
        p90 = sorted(r["from_last_char"])[int(0.9 * (len(r["from_last_char"]) - 1))]
        over = median(a - e for a, e in zip(r["from_last_char"], r["engine"]))
        print(f"{name}: last char -> first audio {median(r['from_last_char']):.1f} ({p90:.1f}); next token -> "
              f"first audio {median(r['from_next_token']):.1f}; engine {median(r['engine']):.1f}, queue "
              f"{median(r['queue']):.1f}; last char -> first audio minus engine {over:.1f}; 10 sentences at 30 tok/s: "
              f"first audio {median(r['answer_first_audio']):.1f}, longest gap {median(r['answer_max_gap']):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
