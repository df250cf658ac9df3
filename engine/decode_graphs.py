"""Short codec decodes replayed from CUDA graphs: the same kernels as the eager decode, launched in one call.

A decode of a few seconds of audio is ~150 small kernels (ATen's own convolutions, the fused Snake, copies), and
their launches take longer on the host than the kernels take on the device: an H100 spent 10.2 ms of host time on
one piece of 62 frames that its CUDA graph replays in 0.08 ms, the device done 2.1 ms after the call, and the
graph's waveform bit for bit the eager one (BENCHMARKS.md, issue 23). Eight streams whose first pieces end in one
step decoded one after another on the host; with graphs the host is free for them at once, and for the server's
other threads (HTTP, text planning), which wait for the GIL meanwhile.

Only decodes of up to GRAPH_UP_TO_FRAMES frames in all (pieces x frames) go through graphs: those always convolve
with ATen's own kernels (engine/conv.py's NATIVE_UP_TO_FRAMES), so a graph holds the kernels an eager decode of its
shape runs, and longer decodes are bound by the device, not by launches. A shape is captured the second time a
thread decodes it: its first decode runs eagerly (a length met once is not worth a capture, which took 1.3-2 eager
decodes of host time on an H100 at 62-150 frames, and the thread's first decode makes its cuBLAS handle, which a
capture may not), and every later one, on any thread, replays the graph (a capture short of memory gives way to an
eager decode: while a capture is under way, PyTorch's allocator frees none of its cached blocks for room, as it does
for an eager one). At most
MAX_GRAPHS graphs are kept, the least recently used dropped first; they are captured on one stream into one memory
pool, which keeps what their largest decode needs at its peak (ATen's convolutions unfold their input, im2col),
their outputs and a cuBLAS workspace per thread that captured. After 24 captures of the full codec's shapes (up to
256 frames) the pool held 688-696 MiB and PyTorch's reserve had grown 1.38-1.40 GiB, by one thread or eight (H100,
BENCHMARKS.md; a stream per capture, as before, grew it 6.2-6.8 GiB); the 8-client bench's server held 0.56 GiB more
than with eager decodes. So a GPU gets graphs only where GRAPHS_NEED_FREE_BYTES, twice that growth, are free once the
engine is loaded (`decoder_for`), and what is left stays for the batches; a card with less decodes eagerly, as before.

A graph's waveforms stay in its own output buffers; a replay queues their copy to the host before it returns, so a
graph captured or replayed later in the shared pool, which may reuse that memory, only runs after the copy (one
stream). Callers hold the engine's lock around `queue_decode`, as around the eager one: one replay at a time.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

from engine.codec import AudioCodec, QueuedDecode
from engine.conv import NATIVE_UP_TO_FRAMES

GRAPH_UP_TO_FRAMES = NATIVE_UP_TO_FRAMES  # decodes of up to this many frames in all are replayed from graphs
MAX_GRAPHS = 64  # graphs kept: their outputs are small (1 MB at 256 frames), their pool is shared
GRAPHS_NEED_FREE_BYTES = 3 * 2**30  # free at load for graphs: twice the reserve their captures grew (1.4 GiB)


@dataclass
class DecodeGraph:
    """One decode shape's graph: its input codes (pieces, codebooks, frames) and the waveforms it writes."""

    graph: torch.cuda.CUDAGraph
    codes: torch.Tensor
    waves: list[torch.Tensor]

    def queue(self, codec: AudioCodec, pieces: list[torch.Tensor]) -> QueuedDecode:
        """The pieces' decode, replayed, and its copy to the host queued (`QueuedDecode.waves` waits for it); each
        piece's code range is read eagerly first (a graph holds none), so codes out of range are refused as by
        `AudioCodec.queue_decode`."""
        ranges = [codec.code_range(codes) for codes in pieces]
        with torch.cuda.device(self.codes.device):
            for slot, codes in zip(self.codes, pieces):
                slot.copy_(codes)
            self.graph.replay()
        return codec.queue_readback(self.waves, ranges)


class DecodeGraphs:
    """`AudioCodec.queue_decode` with short decodes replayed from CUDA graphs (the codec on a CUDA device)."""

    def __init__(self, codec: AudioCodec, *, up_to_frames: int = GRAPH_UP_TO_FRAMES, capacity: int = MAX_GRAPHS):
        self.codec, self.up_to_frames, self.capacity = codec, up_to_frames, capacity
        self.graphs: OrderedDict[tuple[int, int], DecodeGraph] = OrderedDict()  # least recently used first
        self._pool = None  # made with the first graph
        self._stream = None  # every graph's capture stream, made with the first (see _capture)
        self._threads = threading.local()  # .decoded: the shapes this thread has decoded eagerly

    @torch.inference_mode()
    def queue_decode(self, pieces: list[torch.Tensor]) -> QueuedDecode:
        """As `AudioCodec.queue_decode`: pieces of one length on the codec's device, their decode and its copy to the
        host queued; from a graph where the shape has one (or this thread decoded it before), else eagerly."""
        shape = (len(pieces), pieces[0].shape[-1])
        if len({tuple(codes.shape) for codes in pieces}) != 1 or shape[0] * shape[1] > self.up_to_frames:
            return self.codec.queue_decode(pieces)  # unequal lengths are refused there; long ones bound by the device
        graph = self.graphs.get(shape)
        if graph is None:
            decoded = self._threads.__dict__.setdefault("decoded", set())
            if shape not in decoded:
                decoded.add(shape)
                return self.codec.queue_decode(pieces)
            try:
                graph = self._capture(shape)
            except torch.OutOfMemoryError:  # eager: it may empty the allocator's cache for room, a capture may not
                if not self.graphs:  # the failed graph was the pool's only one: PyTorch takes no capture into it now
                    self._pool = None
                return self.codec.queue_decode(pieces)  # the shape's next decode tries again
            self.graphs[shape] = graph
            while len(self.graphs) > self.capacity:
                self.graphs.popitem(last=False)
        self.graphs.move_to_end(shape)
        return graph.queue(self.codec, pieces)

    def _capture(self, shape: tuple[int, int]) -> DecodeGraph:
        """A graph of the decode of `shape` (pieces, frames), captured straight away: not through torch.cuda.graph,
        whose entry waits for the whole device (the LM's queued steps) and empties the allocator's cache, which a
        capture needs neither of. thread_local: other threads' CUDA calls meanwhile (a readback's event sync) neither
        break the capture nor fail. Every capture runs on one side stream: the caching allocator hands a block freed
        in the pool only to the stream it was used on, and PyTorch keeps a cuBLAS workspace per handle and stream, so
        captures on a stream each (torch.cuda.Stream deals out the next of its round robin) would each keep their own
        decode's peak and a workspace in the pool."""
        device = self.codec.device
        with torch.cuda.device(device), torch.inference_mode():
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            if self._stream is None:
                self._stream = torch.cuda.Stream(device)
            codes = torch.zeros((shape[0], self.codec.num_codebooks, shape[1]), dtype=torch.long, device=device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.stream(self._stream):
                graph.capture_begin(pool=self._pool, capture_error_mode="thread_local")
                try:
                    waves, _ = self.codec.decode_unchecked(list(codes))
                finally:
                    graph.capture_end()
        return DecodeGraph(graph, codes, waves)


def decoder_for(codec: AudioCodec, device: torch.device) -> AudioCodec | DecodeGraphs:
    """What queues the decodes on `device` (`queue_decode`): DecodeGraphs on a GPU with GRAPHS_NEED_FREE_BYTES free
    now (call it once the engine is loaded), else the codec itself (a CPU decodes as the codec does)."""
    if device.type != "cuda" or torch.cuda.mem_get_info(device)[0] < GRAPHS_NEED_FREE_BYTES:
        return codec
    return DecodeGraphs(codec)
