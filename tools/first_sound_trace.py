"""Where the time to the first sound goes: launches the app on the demo model with a timestamp at each
hand-off (handler, GPU worker, engine chunk, the live route and each published part), generates in the Voice
design tab (or the Clone tab, from an uploaded clip) of Debian's Chromium, and prints every step in ms from
the click on Generate, then per run and as median / p90: click -> the live request leaves the page (its
Resource Timing `requestStart`), the engine's first chunk -> its first sample played (the live player's audio
clock, mapped to the page's clock where the output device plays it), click -> first sample played.

    .venv/bin/python tools/first_sound_trace.py [runs] [design|clone]

(docs/latency.md holds measurements. Needs the test extras: playwright, gradio_client.)
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = "Measuring the first sound. A second sentence follows it."
WATCH = """(tab) => { window.tl = {};  // wall-clock ms, as the server's marks; the window's capture listeners run first
  window.addEventListener('click', (e) => {
    if (e.target.closest(`#${tab}-generate`)) window.tl.click = performance.timeOrigin + performance.now(); }, true);
}"""
LIVE = """() => { const wall = (ms) => performance.timeOrigin + ms;  // the live player's events and request
  const first = window.voicedeskLive.events.find(e => e.type === 'first');
  const asked = performance.getEntriesByType('resource').find(e => e.name.includes('/live/stream/'));
  return first && asked && {'first sample played': wall(first.playsAt), 'worklet: first block': wall(first.at),
    'live request leaves the page': wall(asked.requestStart), 'live answer starts': wall(asked.responseStart)};
}"""
FIGURES = ("click -> request leaves the page", "engine first chunk -> first sample played",
           "click -> first sample played")


def fill_form(page, tab: str, clip: Path | None = None, text: str = TEXT, steps: int = 8) -> None:
    """Fill the `tab` ("design" or "clone": a new voice from `clip`, a WAV file) of an open page, ready for
    Generate: `text`, and `steps` (few: the demo model's sound does not improve with more)."""
    page.get_by_role("tab", name="Voice design" if tab == "design" else "Clone").click()
    if tab == "clone":
        page.locator("#clone-voice input").click()
        page.get_by_role("option", name="New voice from a clip", exact=True).click()
        page.locator("#clone-reference").get_by_label("Upload file").click()
        page.locator("#clone-reference input[type=file]").set_input_files(str(clip))
        page.wait_for_function("document.querySelector('#clone-clip-hint').innerText.includes(' s ·')",
                               timeout=60_000)
        page.locator("#clone-transcript textarea").fill("What the clip says.")
    page.locator(f"#{tab}-text textarea").fill(text)
    page.locator(f"#tab-{tab}").get_by_text("Advanced settings").click()
    box = page.locator(f"#tab-{tab}").get_by_label("number input for Steps")
    box.fill(str(steps))
    box.press("Enter")


def serve(trace: Path, port: int) -> int:
    """Run the app on the demo model with timestamps appended to `trace` (one JSON line each)."""
    import app.generation
    import app.live
    import app.server
    from app.worker import GpuWorker
    from engine.constants import SAMPLE_RATE
    from engine.engine import Engine

    out, lock = trace.open("a", buffering=1), threading.Lock()

    def mark(event: str, **extra) -> None:
        with lock:
            out.write(json.dumps({"t": time.time(), "event": event, **extra}) + "\n")

    def wrap_generator(owner, name, before, each):
        original = getattr(owner, name)

        def wrapped(*args, **kwargs):
            mark(before)
            for item in original(*args, **kwargs):
                event, extra = each(item)
                mark(event, **extra)
                yield item
        setattr(owner, name, wrapped)

    wrap_generator(app.generation, "run", "handler starts", lambda item: ("handler yields", {}))
    wrap_generator(Engine, "stream", "engine starts",
                   lambda chunk: ("engine chunk ready", {"s": len(chunk.audio) / SAMPLE_RATE}))
    execute = GpuWorker._execute
    GpuWorker._execute = staticmethod(lambda job: (mark("worker starts job"), execute(job))[1])
    listen, put = app.live.LiveStreams.listen, app.live.LiveStream.put
    app.live.LiveStreams.listen = lambda self, live_id: (mark("live request arrives"), listen(self, live_id))[1]

    def published(self, samples):
        put(self, samples)
        mark("live part published", s=round(len(samples) / SAMPLE_RATE, 3))
    app.live.LiveStream.put = published
    return app.server.serve(demo=True, port=port, open_browser=False)


def measure(runs: int, tab: str) -> None:
    import soundfile as sf
    from gradio_client import Client
    from playwright.sync_api import sync_playwright

    from tools.workloads import synthetic_voice

    home = Path(tempfile.mkdtemp(prefix="first_sound_"))
    clip = home / "clip.wav"
    sf.write(clip, synthetic_voice(4.0), 24000)
    trace, port = home / "trace.jsonl", 7800 + os.getpid() % 100
    with (home / "app.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", str(trace), str(port)], cwd=ROOT,
                                env={**os.environ, "VOICEDESK_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        while not _ready(Client, url):
            if proc.poll() is not None:
                sys.exit(f"the app exited: see {home / 'app.log'}")
            time.sleep(1)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required"])
            figures = []
            for run in range(runs):
                print(f"--- run {run + 1}")
                events = _one_run(browser, url, trace, tab, clip)
                for at, event in events:
                    print(f"{at * 1000:7.0f} ms  {event}")
                figures.append(_figures(events))
                print("  ".join(f"{name}: {value:.0f} ms" for name, value in zip(FIGURES, figures[-1])))
            browser.close()
        print(f"--- {runs} runs, ms: median / p90 (nearest rank) / all")
        for name, values in zip(FIGURES, zip(*figures)):
            ranked = sorted(values)
            p90 = ranked[min(len(ranked) - 1, -(-9 * len(ranked) // 10) - 1)]
            print(f"{name}: {statistics.median(values):.0f} / {p90:.0f} / {' '.join(f'{v:.0f}' for v in values)}")
    finally:
        proc.terminate()
        proc.wait(20)


def _ready(client_cls, url: str) -> bool:
    try:
        return client_cls(url, verbose=False).predict(api_name="/model_status")["ready"]
    except Exception:  # not listening yet
        return False


def _one_run(browser, url: str, trace: Path, tab: str, clip: Path) -> list[tuple[float, str]]:
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page, fetched = context.new_page(), []
    page.on("request", lambda r: fetched.append((time.time(), "browser asks (Playwright sees) " + r.url.split("?")[0]
                                                 .rsplit("/")[-1][:12])) if "/live/stream/" in r.url else None)
    page.goto(url)
    page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)
    fill_form(page, tab, clip)
    page.evaluate(WATCH, tab)
    seen = len(trace.read_text().splitlines()) if trace.exists() else 0
    page.locator(f"#{tab}-generate").click()
    page.wait_for_function(f"document.querySelector('#{tab}-status').innerText.includes('Done')", timeout=180_000)
    page.wait_for_function(f"({LIVE})()", timeout=60_000)
    marks = {"browser: click": page.evaluate("window.tl.click"), **page.evaluate(LIVE)}
    context.close()
    events = [(e.pop("t"), " ".join([e.pop("event"), *(f"{k}={v}" for k, v in e.items())]))
              for e in map(json.loads, trace.read_text().splitlines()[seen:])]
    events += [(ms / 1000, name) for name, ms in marks.items()] + fetched
    click, played = marks["browser: click"] / 1000, marks["first sample played"] / 1000
    return [(t - click, event) for t, event in sorted(events) if t <= played + 0.01]


def _figures(events: list[tuple[float, str]]) -> tuple[float, float, float]:
    """(click -> request leaves the page, engine first chunk -> first sample played, click -> first sample played),
    ms."""
    at = {}
    for t, event in events:
        at.setdefault(event.split(" s=")[0], t)
    played = at["first sample played"]
    return (at["live request leaves the page"] * 1000, (played - at["engine chunk ready"]) * 1000, played * 1000)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(serve(Path(sys.argv[2]), int(sys.argv[3])))
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "design")
