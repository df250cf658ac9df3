// The live audio path (docs/latency.md). At the click on Generate (Gradio's `js` step of the event, which runs only
// when the click starts a generation) the page makes a live id, asks for the generation's audio at once
// (GET live/stream/<id>: 16-bit PCM, 24 kHz mono, the API's `pcm`) and hands the id to Gradio with the form; the
// handler publishes the samples of its GPU job under that id. They play through an AudioWorklet
// (live_worklet.js) as they arrive, each generation from its first sample; a new generation or Stop silences the
// one before. "First sound, heard" is read from the audio clock: the frame of the worklet's first sample, mapped
// to the page's clock where the output device plays it (getOutputTimestamp), minus the click; it goes back to the
// app through the panel's hidden box, as the engine's figure's neighbour in the metrics and the history.
(() => {
  const RATE = 24000; // engine/constants.py SAMPLE_RATE: the worklet plays the samples as they are, no resampling
  const clickedAt = {};
  let context = null, node = null, ready = null, current = null, streams = 0;
  const live = { start, stop, isPlaying, tap: false, taps: [], events: [] };
  window.voicedeskLive = live;

  for (const panel of ["clone", "design"]) {
    document.addEventListener("click", (event) => {
      const button = event.target.closest && event.target.closest(`#${panel}-generate`);
      if (button && !button.disabled) clickedAt[panel] = performance.now();
    }, true);
  }
  document.addEventListener("play", (event) => { // the finished result's player: one sound at a time
    if (event.target.closest && event.target.closest(".vd-result")) stop();
  }, true);

  function newId() { // crypto.randomUUID needs a secure context; the page may be served over plain http
    return [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
  }

  function start(panel) {
    const id = newId(), controller = new AbortController();
    const response = fetch(`live/stream/${id}`, { signal: controller.signal, cache: "no-store" }); // first: at once
    stop();
    current = { panel, id, stream: ++streams, controller, clickedAt: clickedAt[panel] ?? performance.now() };
    note({ type: "request", stream: current.stream, panel, id, clickedAt: current.clickedAt });
    play(current, response);
    return id;
  }

  function stop() {
    if (current === null) return;
    if (node) node.port.postMessage({ type: "stop", stream: current.stream });
    current.controller.abort(); // the server stops the generation if it is still being made
    current = null;
  }

  function isPlaying(panel) {
    return current !== null && current.panel === panel;
  }

  function audio() {
    if (ready === null) {
      context = new AudioContext({ sampleRate: RATE, latencyHint: "interactive" });
      ready = context.audioWorklet.addModule("live/worklet.js").then(() => {
        node = new AudioWorkletNode(context, "voicedesk-live", { numberOfInputs: 0, outputChannelCount: [1] });
        node.port.onmessage = ({ data }) => heard(data);
        node.connect(context.destination);
      });
    }
    context.resume(); // within the click's user activation
    return ready;
  }

  async function play(cur, responsePromise) {
    try {
      await audio();
      if (cur !== current) return;
      node.port.postMessage({ type: "start", stream: cur.stream, tap: live.tap });
      const response = await responsePromise;
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        note({ type: "error", stream: cur.stream, status: response.status, message: body.error && body.error.message });
        if (cur === current) stop();
        return;
      }
      const reader = response.body.getReader();
      let odd = null; // a byte of a sample split between two reads
      for (;;) {
        const { done, value } = await reader.read();
        if (done || cur !== current) break;
        const bytes = odd === null ? value : concat(odd, value);
        const count = bytes.length >> 1, view = new DataView(bytes.buffer, bytes.byteOffset, count * 2);
        odd = bytes.length % 2 ? bytes.slice(-1) : null;
        const samples = new Float32Array(count);
        for (let i = 0; i < count; i++) samples[i] = view.getInt16(2 * i, true) / 32768; // exact in float32
        node.port.postMessage({ type: "samples", stream: cur.stream, samples }, [samples.buffer]);
      }
      if (cur === current) node.port.postMessage({ type: "end", stream: cur.stream });
    } catch (err) {
      if (err.name !== "AbortError") note({ type: "error", stream: cur.stream, message: String(err) });
    }
  }

  function heard(message) {
    if (message.type === "tap") {
      live.taps.push(message);
      return;
    }
    if (message.type === "first") { // the frame to the page's clock, where the output device plays it
      const ts = context.getOutputTimestamp();
      message.playsAt = ts.performanceTime + (message.frame / context.sampleRate - ts.contextTime) * 1000;
    }
    note(message);
    if (current === null || message.stream !== current.stream) return;
    if (message.type === "first") {
      const box = document.querySelector(`#${current.panel}-heard textarea, #${current.panel}-heard input`);
      if (box) {
        box.value = String(Math.round(message.playsAt - current.clickedAt));
        box.dispatchEvent(new Event("input", { bubbles: true }));
      }
    }
    if (message.type === "ended") current = null;
  }

  function note(event) {
    live.events.push({ ...event, at: performance.now() });
  }

  function concat(a, b) {
    const joined = new Uint8Array(a.length + b.length);
    joined.set(a);
    joined.set(b, a.length);
    return joined;
  }
})();
