// The live audio path (docs/latency.md). At the click on Generate (or the Studio's Render) the page makes a live id
// and asks for the generation's audio at once (GET live/stream/<id>: 16-bit PCM, 24 kHz mono, the API's `pcm`).
// Gradio's `js` step of the event, which runs only when the click starts a generation (50-200 ms later), takes
// that request and hands its id to the handler with the form; the handler publishes the samples of its GPU job
// under that id. A click Gradio ignores (a generation of the page still runs) leaves a request nobody takes: the
// next click drops it. The samples play through an AudioWorklet (live_worklet.js) as they arrive, each generation
// from its first sample; a new generation or Stop silences the one before. "First sound, heard" is read from the
// audio clock: the frame of the worklet's first sample, mapped to the page's clock where the output device plays
// it (getOutputTimestamp), minus the click; it goes back to the app through the panel's hidden box, with the live
// id of the generation it was measured for (app/ui/output.py). Another tab's generation takes over at its first
// sample.
(() => {
  const RATE = 24000; // engine/constants.py SAMPLE_RATE: the worklet plays the samples as they are, no resampling
  const clickedAt = {}, pending = {}; // per panel: the last click, its request until Gradio's js step takes it
  const latest = {}; // per panel: the live id of its last generation, for Stop (app/ui/output.py stop_js)
  let node = null, current = null, streams = 0;
  const live = { start, stop, isPlaying, latest: (panel) => latest[panel] || "", context: () => context, tap: false,
                 taps: [], events: [] };
  window.voicedeskLive = live;

  const STARTS = { clone: "#clone-generate", design: "#design-generate",
                   studio: "#studio-render, #studio-render-chapter, #studio-retake" };
  for (const [panel, buttons] of Object.entries(STARTS)) {
    document.addEventListener("click", (event) => {
      const button = event.target.closest && event.target.closest(buttons);
      if (!button || button.disabled) return;
      clickedAt[panel] = performance.now();
      if (pending[panel]) pending[panel].controller.abort();
      pending[panel] = ask();
      latest[panel] = pending[panel].id;
      if (context.state !== "running") context.resume(); // within the click's user activation
    }, true);
  }
  document.addEventListener("play", (event) => { // the finished result's player: one sound at a time
    if (event.target.closest && event.target.closest(".vd-result")) silence();
  }, true);
  // One sound at a time across the app's tabs too: when another tab's generation plays its first sample, this
  // tab's sound stops (its generation goes on, unheard, and is stored), as a new generation of one page silences
  // the one before. At that first sample, not at the other tab's click: its job may wait for the GPU behind this
  // one's until then, and this sound is all there is to hear.
  const tabs = typeof BroadcastChannel === "function" ? new BroadcastChannel("voicedesk-live") : null;
  if (tabs) tabs.onmessage = ({ data }) => {
    if (data.type !== "playing" || current === null) return;
    note({ type: "taken over", stream: current.stream });
    silence();
  };

  function newId() { // crypto.randomUUID needs a secure context; the page may be served over plain http
    return [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
  }

  function ask() {
    const id = newId(), controller = new AbortController();
    const response = fetch(`live/stream/${id}`, { signal: controller.signal, cache: "no-store" });
    response.catch(() => {}); // dropped unheard: its abort is no error
    return { id, controller, response, askedAt: performance.now() };
  }

  function start(panel) { // Gradio's js step: this generation's request becomes the one heard
    const asked = pending[panel] || ask();
    delete pending[panel];
    latest[panel] = asked.id;
    silence();
    current = { panel, ...asked, stream: ++streams, clickedAt: clickedAt[panel] ?? asked.askedAt };
    note({ type: "request", stream: current.stream, panel, id: asked.id, clickedAt: current.clickedAt,
           askedAt: asked.askedAt });
    play(current, asked.response);
    return asked.id;
  }

  // A new generation (or the finished result's player) silences the sound: the generation before goes on (the
  // Studio's Render all beside a Retake) and is stored, its request read to its end unheard. Stop also ends the
  // request: the server stops the generation if it is still being made.
  function silence() {
    if (current === null) return;
    if (node) node.port.postMessage({ type: "stop", stream: current.stream });
    current = null;
  }

  function stop() {
    const cur = current;
    silence();
    if (cur !== null) cur.controller.abort();
  }

  function isPlaying(panel) {
    return current !== null && current.panel === panel;
  }

  // Made with the page, not at the click: making a context takes a few hundred ms on a busy computer. It runs
  // (renders) only while there is something to play.
  const context = new AudioContext({ sampleRate: RATE, latencyHint: "interactive" });
  const ready = context.audioWorklet.addModule("live/worklet.js").then(() => {
    node = new AudioWorkletNode(context, "voicedesk-live", { numberOfInputs: 0, outputChannelCount: [1] });
    node.port.onmessage = ({ data }) => heard(data);
    node.connect(context.destination);
  });
  context.suspend();

  async function play(cur, responsePromise) {
    try {
      if (context.state !== "running") context.resume();
      await ready;
      if (cur === current) node.port.postMessage({ type: "start", stream: cur.stream, tap: live.tap });
      const response = await responsePromise;
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        note({ type: "error", stream: cur.stream, status: response.status, message: body.error && body.error.message });
        if (cur === current) silence();
        return;
      }
      const reader = response.body.getReader();
      let odd = null; // a byte of a sample split between two reads
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (cur !== current) continue; // replaced: read on unheard, so the server is not held up
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
    message.received = performance.now();
    if (message.type === "tap") {
      live.taps.push(message);
      return;
    }
    if (message.type === "first") {
      if (tabs) tabs.postMessage({ type: "playing" });
      whenPlayed(message, current);
      return;
    }
    note(message);
    if (current !== null && message.stream === current.stream && message.type === "ended") current = null;
    const idle = current === null && Object.keys(pending).length === 0; // nothing to play, nothing asked for
    if (idle && (message.type === "ended" || message.type === "stopped")) context.suspend();
  }

  // The page's time at which the device plays `first.frame`: read once the device's clock has passed it, so that
  // a stall of the audio thread (a busy computer) between the reading and the sample cannot shift it.
  function whenPlayed(first, cur) {
    const ts = context.getOutputTimestamp(), at = first.frame / context.sampleRate;
    if (ts.contextTime < at && performance.now() - first.received < 2000) {
      setTimeout(() => whenPlayed(first, cur), 2);
      return;
    }
    first.playsAt = ts.performanceTime - (ts.contextTime - at) * 1000;
    note(first);
    if (cur === null || cur.stream !== first.stream) return;
    const box = document.querySelector(`#${cur.panel}-heard textarea, #${cur.panel}-heard input`);
    if (box) {
      box.value = `${cur.id} ${Math.round(first.playsAt - cur.clickedAt)}`; // a new value each generation
      box.dispatchEvent(new Event("input", { bubbles: true }));
    }
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
