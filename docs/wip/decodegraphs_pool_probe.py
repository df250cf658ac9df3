"""What DecodeGraphs' shared pool holds after 24 shapes' captures on the full-size codec (random weights): by one
thread, and by 8 threads in turn (3 shapes each, as 8 clients' threads would). python pool_probe.py FULL OUT.json"""
import json
import sys
import threading

import torch

from engine.codec import AudioCodec
from engine.decode_graphs import DecodeGraphs

folder, out = sys.argv[1], sys.argv[2]
codec = AudioCodec.load(f"{folder}/audio_tokenizer", "cuda")
codec.warm_up()
SHAPES = [(1, f) for f in range(100, 39, -5)] + [(2, 100), (2, 80), (2, 60), (2, 40), (3, 60), (4, 50), (4, 30),
                                                   (6, 30), (8, 25), (8, 20), (1, 256)]
generator = torch.Generator().manual_seed(0)


def pool_bytes(graphs):
    return sum(s["total_size"] for s in torch.cuda.memory_snapshot()
               if tuple(s["segment_pool_id"]) == tuple(graphs._pool))


def twice(graphs, shapes, held):
    for pieces, frames in shapes:
        codes = [torch.randint(0, codec.codebook_size, (codec.num_codebooks, frames), generator=generator).cuda()
                 for _ in range(pieces)]
        want = codec.queue_decode(codes).waves()
        for _ in range(3):  # eager, captured, replayed
            got = graphs.queue_decode(codes).waves()
            assert all(torch.equal(g, w) for g, w in zip(got, want)), (pieces, frames)
        held.append(round(pool_bytes(graphs) / 2**20, 1))


result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "shapes": SHAPES}
for name, threads in (("one_thread", 1), ("eight_threads", 8)):
    torch.cuda.synchronize()
    before = torch.cuda.memory_reserved()
    graphs, held = DecodeGraphs(codec), []
    for t in range(threads):
        worker = threading.Thread(target=twice, args=(graphs, SHAPES[t::threads], held))
        worker.start()
        worker.join()
    result[name] = {"graphs": len(graphs.graphs), "pool_mib_after_each": held, "pool_mib": held[-1],
                    "reserved_mib_more": round((torch.cuda.memory_reserved() - before) / 2**20, 1)}
    print(name, json.dumps(result[name]), flush=True)
    del graphs
    torch.cuda.empty_cache()
json.dump(result, open(out, "w"), indent=1)
