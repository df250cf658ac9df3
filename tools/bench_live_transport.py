"""PCM to a page over a streaming fetch vs over a WebSocket: how long after the server writes a piece of audio
the page has all of it (docs/latency.md, "The live path: which transport").

    .venv/bin/python tools/bench_live_transport.py [runs] [pieces]

A Starlette app in this process writes `pieces` pieces of 16-bit PCM (a sentence-sized first piece of 2 s, then
1 s each, 24 kHz mono, 0.2 s apart: how the engine's chunks arrive) over `GET /pcm` (chunked HTTP, what the API's
`pcm` answers) and over `/ws` (one binary message a piece); Debian's Chromium reads both and notes when each
piece is complete. Both clocks are this machine's wall clock (time.time(), performance.timeOrigin + now()).
Serving a WebSocket needs the `websockets` package, which the app does not otherwise use: pass its folder in
PYTHONPATH (pip install --target DIR websockets).
"""
from __future__ import annotations

import asyncio
import json
import socket
import statistics
import sys
import threading
import time

RATE = 24000
GAP_S = 0.2
PAGE = """<!doctype html><script>
async function viaFetch(sizes) {
  const got = [], reader = (await fetch('/pcm')).body.getReader();
  let bytes = 0, next = 0, boundary = sizes[0];
  for (;;) {
    const {done, value} = await reader.read();
    if (done) return got;
    bytes += value.length;
    const now = performance.timeOrigin + performance.now();
    while (next < sizes.length && bytes >= boundary) { got.push(now); next += 1; boundary += sizes[next] || 0; }
  }
}
function viaSocket(count) {
  return new Promise((resolve) => {
    const got = [], ws = new WebSocket(`ws://${location.host}/ws`);
    ws.binaryType = 'arraybuffer';
    ws.onmessage = () => {
      got.push(performance.timeOrigin + performance.now());
      if (got.length === count) resolve(got);
    };
  });
}
</script>"""


def piece_sizes(count: int) -> list[int]:
    return [2 * RATE * 2] + [RATE * 2] * (count - 1)


def app(sent: list[float], count: int):
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, StreamingResponse
    from starlette.routing import Route, WebSocketRoute

    async def pieces():
        for size in piece_sizes(count):
            await asyncio.sleep(GAP_S)
            sent.append(time.time() * 1000)
            yield bytes(size)

    async def pcm(request):
        return StreamingResponse(pieces(), media_type="audio/pcm")

    async def ws(socket_):
        await socket_.accept()
        async for piece in pieces():
            await socket_.send_bytes(piece)
        await socket_.close()

    return Starlette(routes=[Route("/", lambda r: HTMLResponse(PAGE)), Route("/pcm", pcm),
                             WebSocketRoute("/ws", ws)])


def main(runs: int, count: int) -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sent: list[float] = []
    server = uvicorn.Server(uvicorn.Config(app(sent, count), host="127.0.0.1", port=port, log_level="warning",
                                           ws="websockets"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    delays: dict[str, list[float]] = {"fetch": [], "websocket": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        for _ in range(runs):
            for name, call in (("fetch", f"viaFetch({json.dumps(piece_sizes(count))})"),
                               ("websocket", f"viaSocket({count})")):
                sent.clear()
                got = page.evaluate(call)
                delays[name] += [g - s for g, s in zip(got, sent)]
        browser.close()
    server.should_exit = True
    for name, values in delays.items():
        values.sort()
        print(f"{name:9s} piece written -> complete in the page, ms: median {statistics.median(values):.2f}, "
              f"p90 {values[int(0.9 * (len(values) - 1))]:.2f}, max {values[-1]:.2f} ({len(values)} pieces)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, int(sys.argv[2]) if len(sys.argv) > 2 else 6)
