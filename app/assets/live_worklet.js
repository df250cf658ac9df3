// The live player's sound (live_player.js feeds it): plays one stream's samples as they arrive, after a small
// jitter buffer, gapless from piece to piece; a new stream or Stop silences the one before from the next block.
// It reports, on the AudioContext's clock (frames), when the first sample of a stream played, when it ended or
// was stopped, and, when asked (`tap`, for tests), every block of the stream's samples it played.
const JITTER_S = 0.04; // start (and start again after running dry) once this much is queued, or the stream ended

class LivePlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.reset(null);
    this.port.onmessage = ({ data }) => this.receive(data);
  }

  reset(stream) {
    this.stream = stream;
    this.queue = []; // Float32Arrays, oldest first
    this.offset = 0; // samples of queue[0] already played
    this.queued = 0;
    this.ended = false;
    this.running = false;
    this.played = 0;
  }

  receive(message) {
    if (message.type === "start") {
      this.reset(message.stream);
      this.tap = message.tap;
    } else if (message.stream !== this.stream) {
      // a piece of a stream already replaced or stopped
    } else if (message.type === "samples") {
      this.queue.push(message.samples);
      this.queued += message.samples.length;
    } else if (message.type === "end") {
      this.ended = true;
    } else if (message.type === "stop") {
      this.port.postMessage({ type: "stopped", stream: this.stream, frame: currentFrame, played: this.played,
                              queued: this.queued });
      this.reset(null);
    }
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    out.fill(0);
    if (this.stream === null) return true;
    if (!this.running) this.running = this.queued >= JITTER_S * sampleRate || (this.ended && this.queued > 0);
    let filled = 0;
    if (this.running) {
      while (filled < out.length && this.queue.length) {
        const head = this.queue[0];
        const take = Math.min(out.length - filled, head.length - this.offset);
        out.set(head.subarray(this.offset, this.offset + take), filled);
        filled += take;
        this.offset += take;
        this.queued -= take;
        if (this.offset === head.length) [this.queue, this.offset] = [this.queue.slice(1), 0];
      }
      if (filled && this.played === 0) {
        this.port.postMessage({ type: "first", stream: this.stream, frame: currentFrame });
      }
      if (filled && this.tap) {
        this.port.postMessage({ type: "tap", stream: this.stream, frame: currentFrame, samples: out.slice(0, filled) });
      }
      this.played += filled;
      if (filled < out.length) this.running = false; // ran dry: the next sentence is still being made
    }
    if (this.ended && this.queued === 0) {
      this.port.postMessage({ type: "ended", stream: this.stream, frame: currentFrame + filled, played: this.played });
      this.reset(null);
    }
    return true;
  }
}

registerProcessor("voicedesk-live", LivePlayer);
