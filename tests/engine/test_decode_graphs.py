"""engine/decode_graphs.py: which decodes a graph replays (CPU, the capture stood in for), and on a GPU that a graph's
waveforms are the eager decode's bit for bit (same kernels), refuse codes out of range, and survive other graphs of
the shared pool replayed before they are read."""
import threading

import pytest
import torch

from engine import decode_graphs
from engine.codec import AudioCodec
from engine.constants import DEMO_MODEL
from engine.decode_graphs import GRAPH_UP_TO_FRAMES, GRAPHS_NEED_FREE_BYTES, DecodeGraphs, decoder_for

CODEC_DIR = DEMO_MODEL / "audio_tokenizer"
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")


@pytest.fixture(scope="module")
def cpu_codec():
    return AudioCodec.load(CODEC_DIR)


def random_pieces(codec, pieces: int, frames: int, seed: int, device="cpu") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, codec.codebook_size, (codec.num_codebooks, frames), generator=g).to(device)
            for _ in range(pieces)]


class StandIn:
    """A captured graph as the policy sees it: it counts its replays and decodes with `decode`."""

    def __init__(self, decode):
        self.decode, self.replays = decode, 0

    def queue(self, codec, pieces):
        self.replays += 1
        return self.decode(pieces)


@pytest.fixture
def graphs(cpu_codec, monkeypatch):
    """DecodeGraphs over the CPU codec with captures stood in for; `.captured` lists the shapes captured, `.eager`
    counts the codec's own decodes."""
    made = DecodeGraphs(cpu_codec)
    made.captured, made.eager = [], 0
    queue_decode = cpu_codec.queue_decode

    def capture(shape):
        made.captured.append(shape)
        return StandIn(queue_decode)

    def eager(pieces):
        made.eager += 1
        return queue_decode(pieces)

    monkeypatch.setattr(made, "_capture", capture)
    monkeypatch.setattr(cpu_codec, "queue_decode", eager)
    return made


def test_a_shape_is_decoded_eagerly_first_then_captured_and_replayed(graphs, cpu_codec):
    pieces = random_pieces(cpu_codec, 1, 12, seed=1)
    want = cpu_codec.decode(pieces[0]).float()
    for _ in range(3):
        assert torch.equal(graphs.queue_decode(pieces).waves()[0], want)
    assert graphs.captured == [(1, 12)] and graphs.eager == 1 and graphs.graphs[(1, 12)].replays == 2


def test_a_threads_first_decode_of_a_shape_is_eager_unless_a_graph_exists(graphs, cpu_codec):
    """Each thread's first decode of a shape runs eagerly (it makes the thread's handles a capture may not); once any
    thread has captured the shape, every thread replays it."""
    def in_thread(pieces):
        worker = threading.Thread(target=lambda: graphs.queue_decode(pieces).waves())
        worker.start()
        worker.join()

    short, other = random_pieces(cpu_codec, 1, 10, seed=2), random_pieces(cpu_codec, 1, 11, seed=3)
    graphs.queue_decode(short)
    in_thread(short)  # another thread's first: eager, no capture
    assert graphs.captured == [] and graphs.eager == 2
    graphs.queue_decode(short)  # this thread's second: captured
    in_thread(short)  # another thread's first, the graph there: replayed
    in_thread(other)
    assert graphs.captured == [(1, 10)] and graphs.eager == 3 and graphs.graphs[(1, 10)].replays == 2


@pytest.mark.parametrize("pieces, frames, graphed", [(1, GRAPH_UP_TO_FRAMES, True), (2, GRAPH_UP_TO_FRAMES // 2, True),
                                                     (1, GRAPH_UP_TO_FRAMES + 1, False),
                                                     (2, GRAPH_UP_TO_FRAMES // 2 + 1, False)])
def test_only_decodes_of_up_to_the_limit_in_all_are_graphed(graphs, monkeypatch, pieces, frames, graphed):
    monkeypatch.setattr(graphs.codec, "queue_decode", lambda p: graphs.__setattr__("eager", graphs.eager + 1))
    codes = [torch.zeros((8, frames), dtype=torch.long)] * pieces
    for _ in range(3):
        graphs.queue_decode(codes)
    assert graphs.captured == ([(pieces, frames)] if graphed else []) and graphs.eager == (1 if graphed else 3)


def test_pieces_of_unequal_lengths_are_refused_as_by_the_codec(graphs, cpu_codec):
    pieces = random_pieces(cpu_codec, 1, 10, seed=4) + random_pieces(cpu_codec, 1, 11, seed=5)
    for _ in range(2):
        with pytest.raises(ValueError, match="one length"):
            graphs.queue_decode(pieces)
    assert graphs.captured == []


def test_the_least_recently_used_graph_goes_first(graphs, monkeypatch):
    monkeypatch.setattr(graphs, "capacity", 2)
    monkeypatch.setattr(graphs.codec, "queue_decode", lambda p: None)
    a, b, c = ([torch.zeros((8, frames), dtype=torch.long)] for frames in (10, 11, 12))
    for codes in (a, a, b, b, a, c, c):  # a and b captured, a used again, c captured: b is the least recent
        graphs.queue_decode(codes)
    assert list(graphs.graphs) == [(1, 10), (1, 12)] and graphs.captured == [(1, 10), (1, 11), (1, 12)]
    graphs.queue_decode(b)  # b again: this thread decoded it before, so captured again at once
    assert list(graphs.graphs) == [(1, 12), (1, 11)]


def test_a_capture_short_of_memory_gives_way_to_an_eager_decode_and_the_next_one_captures(graphs, cpu_codec,
                                                                                           monkeypatch):
    """While a capture is under way the allocator frees none of its cache for room: a capture that runs out of memory
    hands its decode to the codec, which may, and the shape's next decode captures again."""
    pieces = random_pieces(cpu_codec, 1, 12, seed=12)
    want = cpu_codec.decode(pieces[0]).float()
    capture = graphs._capture

    def short_of_memory(shape):
        raise torch.OutOfMemoryError("CUDA out of memory (a stand-in)")

    graphs.queue_decode(pieces)  # this thread's first: eager
    monkeypatch.setattr(graphs, "_capture", short_of_memory)
    assert torch.equal(graphs.queue_decode(pieces).waves()[0], want)
    assert graphs.eager == 2 and not graphs.graphs
    monkeypatch.setattr(graphs, "_capture", capture)
    assert torch.equal(graphs.queue_decode(pieces).waves()[0], want)
    assert graphs.captured == [(1, 12)] and graphs.eager == 2 and graphs.graphs[(1, 12)].replays == 1


@pytest.mark.parametrize("free, graphed", [(GRAPHS_NEED_FREE_BYTES, True), (GRAPHS_NEED_FREE_BYTES - 1, False)])
def test_a_gpu_gets_graphs_only_with_the_memory_free_their_pool_needs(cpu_codec, monkeypatch, free, graphed):
    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: asked.append(device) or (free, 80 * 2**30))
    decoder = decoder_for(cpu_codec, torch.device("cuda", 1))
    assert isinstance(decoder, DecodeGraphs) == graphed and (graphed or decoder is cpu_codec)
    assert asked == [torch.device("cuda", 1)]
    assert decoder_for(cpu_codec, torch.device("cpu")) is cpu_codec and len(asked) == 1  # a CPU asks no GPU


@pytest.fixture(scope="module")
def gpu_codec():
    return AudioCodec.load(CODEC_DIR, "cuda")


@cuda
@pytest.mark.parametrize("pieces, frames", [(1, 62), (2, 40), (1, GRAPH_UP_TO_FRAMES)])
def test_a_graphs_waves_are_the_eager_decodes_bit_for_bit(gpu_codec, pieces, frames):
    """Eager, captured, replayed: each call's waves equal the eager decode of its own codes (new codes each time:
    the graph reads its input, not the codes it was captured with)."""
    graphs = DecodeGraphs(gpu_codec)
    for seed in range(3):
        codes = random_pieces(gpu_codec, pieces, frames, seed=seed, device="cuda")
        want = gpu_codec.queue_decode(codes).waves()
        got = graphs.queue_decode(codes).waves()
        assert all(torch.equal(g, w) for g, w in zip(got, want)), seed
    assert list(graphs.graphs) == [(pieces, frames)]


@cuda
def test_a_replayed_decode_refuses_codes_out_of_range(gpu_codec):
    graphs = DecodeGraphs(gpu_codec)
    codes = random_pieces(gpu_codec, 1, 30, seed=6, device="cuda")
    for _ in range(2):
        graphs.queue_decode(codes).waves()
    assert (1, 30) in graphs.graphs
    for bad in (codes[0] + gpu_codec.codebook_size, codes[0] - 1 - codes[0].max()):
        with pytest.raises(ValueError, match="out of range"):
            graphs.queue_decode([bad]).waves()


@cuda
def test_graphs_of_the_shared_pool_replayed_back_to_back_each_give_their_own_waves(gpu_codec):
    """Three shapes' graphs share one memory pool, where a graph's outputs may lie in the memory a graph captured
    before it works in: replayed latest capture first, each before the others' waves are read, each is still the eager
    decode of its codes (a replay queues its copy to the host before another graph may reuse the memory)."""
    graphs = DecodeGraphs(gpu_codec)
    shapes = [(1, 70), (1, 50), (2, 33)]
    for pieces, frames in shapes * 2:  # eager, then captured
        graphs.queue_decode(random_pieces(gpu_codec, pieces, frames, seed=7, device="cuda")).waves()
    assert list(graphs.graphs) == shapes
    codes = [random_pieces(gpu_codec, pieces, frames, seed=8 + i, device="cuda")
             for i, (pieces, frames) in enumerate(shapes)]
    want = [gpu_codec.queue_decode(c).waves() for c in codes]
    torch.cuda._sleep(100_000_000)  # the replays queue behind device work, as behind a generation's steps
    queued = [graphs.queue_decode(c) for c in reversed(codes)]
    for got, expected in zip((q.waves() for q in queued), reversed(want), strict=True):
        assert all(torch.equal(g, w) for g, w in zip(got, expected, strict=True))


def pool_bytes(graphs: DecodeGraphs) -> int:
    """What the graphs' memory pool holds on the device, its blocks in use and free."""
    return sum(segment["total_size"] for segment in torch.cuda.memory_snapshot()
               if tuple(segment["segment_pool_id"]) == tuple(graphs._pool))


@cuda
def test_each_capture_reuses_the_pool_memory_the_captures_before_it_freed(gpu_codec):
    """All captures run on one stream: twelve shapes' graphs, longest first, keep less than twice the first one's pool
    (the allocator hands a freed block only to its stream, and keeps a cuBLAS workspace per stream: on a stream each,
    every capture would add its decode's peak and a workspace)."""
    graphs = DecodeGraphs(gpu_codec)
    held = []
    for frames in range(70, 58, -1):
        codes = random_pieces(gpu_codec, 1, frames, seed=frames, device="cuda")
        for _ in range(2):  # eager, then captured
            graphs.queue_decode(codes).waves()
        held.append(pool_bytes(graphs))
    assert len(graphs.graphs) == 12 and held[-1] < 2 * held[0], held


@cuda
def test_a_capture_short_of_memory_gives_the_eager_waves_and_leaves_a_pool_the_next_capture_can_take(gpu_codec,
                                                                                                      monkeypatch):
    """A capture that runs out of memory (stood in for: the decode raises once its work is captured) gives the eager
    waves. Its graph, the only one, took the pool along when it went (PyTorch takes no capture into a pool no graph
    holds): the next capture makes a new pool, and its replays give the eager waves too."""
    graphs = DecodeGraphs(gpu_codec)
    codes = random_pieces(gpu_codec, 1, 40, seed=11, device="cuda")
    want = gpu_codec.queue_decode(codes).waves()
    graphs.queue_decode(codes).waves()  # this thread's first: eager
    unchecked = gpu_codec.decode_unchecked

    def short_of_memory(pieces):
        decoded = unchecked(pieces)
        if torch.cuda.is_current_stream_capturing():
            raise torch.OutOfMemoryError("CUDA out of memory (a stand-in)")
        return decoded

    monkeypatch.setattr(gpu_codec, "decode_unchecked", short_of_memory)
    assert all(torch.equal(g, w) for g, w in zip(graphs.queue_decode(codes).waves(), want, strict=True))
    assert not graphs.graphs
    monkeypatch.undo()
    for _ in range(2):  # captured, replayed
        assert all(torch.equal(g, w) for g, w in zip(graphs.queue_decode(codes).waves(), want, strict=True))
    assert list(graphs.graphs) == [(1, 40)]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_graphs_of_a_codec_on_the_second_gpu_from_a_thread_on_the_first():
    """An engine on cuda:1 decodes from threads whose current device is cuda:0: its graphs are captured and replayed
    on cuda:1, with the eager waves."""
    codec = AudioCodec.load(CODEC_DIR, "cuda:1")
    graphs = DecodeGraphs(codec)
    assert torch.cuda.current_device() == 0
    for seed in range(3):  # eager, captured, replayed
        codes = random_pieces(codec, 2, 30, seed=seed, device="cuda:1")
        want = codec.queue_decode(codes).waves()
        assert all(torch.equal(g, w) for g, w in zip(graphs.queue_decode(codes).waves(), want, strict=True)), seed
    assert list(graphs.graphs) == [(2, 30)] and torch.cuda.current_device() == 0


@cuda
def test_a_gpu_engines_short_decodes_replay_graphs_with_the_eager_waves(monkeypatch):
    from engine.engine import Engine

    monkeypatch.setattr(decode_graphs, "GRAPHS_NEED_FREE_BYTES", 0)  # a user's 8 GB card runs this test too
    engine = Engine.load(DEMO_MODEL, device="cuda", mode="eager")
    pieces = [random_pieces(engine.codec, 1, frames, seed=9)[0] for frames in (20, 20, 35)]
    want = engine._decode_pieces(pieces)  # each run's first decode on this thread: the codec's eager one
    assert not engine._decoder.graphs
    for _ in range(2):  # captured, replayed
        for got, expected in zip(engine._decode_pieces(pieces), want, strict=True):
            assert (got == expected).all()
    assert set(engine._decoder.graphs) == {(2, 20), (1, 35)}  # the two pieces of one length decode together
