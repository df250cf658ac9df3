"""The LM's input embedding, the PyTorch ops (`kernels.embed.embed_ref`, what a step ran before) against the fused
kernel (`kernels.embed.embed`), at the runner's bucket sizes:

    python -m tools.kernels.bench_embed [--rows 192 320 896 1536 7168] [--model-rows 192 896 1536] [--json FILE]

OmniVoice's sizes (`ModelConfig`: 8 codebooks of 1025 classes, hidden 1024, 151,676 text tokens) in the runner's
buffers: [1, 8, rows] ids, [1, rows] mask, a prompt's mix of text rows (the first TEXT_SHARE of each layout) and audio
rows. Each size is checked before it is timed: the kernel's output bit for bit the ops' where every codebook sum is
exact in fp32 (tables of multiples of 1/16), and on random tables within one fp16 ulp of theirs. Times: microseconds
per call replayed from a CUDA graph (`tools.kernels.check_realtime_gpu.graph_us`), with the kernels each launches
(torch profiler). Then the whole model's step at --model-rows (a random full-size fp16 LM, fused kernels on, the
packed layouts of LAYOUTS, logits of the target rows, from CUDA graphs) with the embedding fused and with the ops,
replayed alternately: ms per step of each and their difference, and how far the logits moved. Exits non-zero when a
check fails. Random tables and weights; say so where the figures are used. Needs CUDA.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from engine.config import ModelConfig
from kernels.embed import embed, embed_ref
from kernels.numerics import ulp_distance

_CFG = ModelConfig()
BOOKS, CLASSES, HIDDEN, VOCAB = _CFG.num_codebooks, _CFG.audio_vocab_size, _CFG.hidden_size, _CFG.vocab_size
TEXT_SHARE = 0.15  # style and text rows of a prompt against its reference and target frames (the baseline's ~0.13)
LAYOUTS = {  # rows of a bucket -> its sequences' blocks (prompt, uncond target), as the runner packs them
    192: [121, 62],  # a lone streamed first piece (62 frames)
    320: [200, 95],  # a 3 s output
    896: [574, 290],  # the baseline request
    1536: [121, 62] * 8,  # 8 clients' first pieces together
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.kernels.bench_embed", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[192, 320, 896, 1536, 7168])
    parser.add_argument("--model-rows", type=int, nargs="*", default=[192, 896, 1536], choices=sorted(LAYOUTS))
    parser.add_argument("--json", help="write the table's rows here")
    return parser.parse_args(argv)


def inputs(rows: int, *, books: int = BOOKS, classes: int = CLASSES, hidden: int = HIDDEN, vocab: int = VOCAB,
           exact: bool, device) -> tuple[torch.Tensor, ...]:
    """(ids [1, books, rows], audio_mask [1, rows], audio table, text table) in fp16: tables of multiples of 1/16
    in [-4, 4] when `exact`, normal values otherwise."""
    g = torch.Generator().manual_seed(rows)
    audio = torch.arange(rows) >= int(TEXT_SHARE * rows)
    ids = torch.randint(0, classes, (1, books, rows), generator=g)
    ids[0, 0] = torch.where(audio, ids[0, 0], torch.randint(0, vocab, (rows,), generator=g))

    def table(n: int) -> torch.Tensor:
        values = torch.randint(-64, 65, (n, hidden), generator=g) / 16 if exact else torch.randn(n, hidden, generator=g)
        return values.to(device, torch.float16)

    return ids.to(device), audio[None].to(device), table(books * classes), table(vocab)


def check(rows: int, *, device, **sizes) -> list[str]:
    """What is wrong with the kernel at `rows`: exact sums bit for bit, random ones within one ulp."""
    failures = []
    for exact in (True, False):
        args = inputs(rows, exact=exact, device=device, **sizes)
        ulps = ulp_distance(embed(*args), embed_ref(*args)).max().item()
        if ulps > (0 if exact else 1):
            failures.append(f"{rows} rows, {'exact' if exact else 'random'} tables: {ulps} ulp from the ops")
    return failures


def time_rows(rows: int) -> dict:
    from tools.kernels.bench_reveal import kernels_per_call
    from tools.kernels.check_realtime_gpu import graph_us

    args = inputs(rows, exact=False, device="cuda")
    out = torch.empty(1, rows, HIDDEN, dtype=torch.float16, device="cuda")
    ops_us = graph_us(lambda i: embed_ref(*args))
    fused_us = graph_us(lambda i: embed(*args, out=out))
    return {"rows": rows, "ops_us": ops_us, "fused_us": fused_us,
            "ops_kernels": kernels_per_call(lambda: embed_ref(*args)),
            "fused_kernels": kernels_per_call(lambda: embed(*args, out=out))}


def key_ranges(rows: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The runner's per-row key ranges for LAYOUTS[rows]: each block attends to itself, the pads to each other."""
    start, end, row = torch.empty(rows, dtype=torch.int32), torch.empty(rows, dtype=torch.int32), 0
    for block in LAYOUTS[rows] + [rows - sum(LAYOUTS[rows])]:
        start[row:row + block], end[row:row + block] = row, row + block
        row += block
    return start.to(device), end.to(device)


def model_steps(rows_list: list[int], replays: int = 30) -> list[dict]:
    """ms per model step with the embedding fused and with the PyTorch ops (the LM's other kernels fused in both),
    replayed alternately from two CUDA graphs, and the largest logit difference between them."""
    from engine.lm.model import KeyRanges, OmniVoiceLM
    from tools.kernels.check_realtime_gpu import replay_us

    torch.manual_seed(0)
    with torch.device("cuda"):
        lm = OmniVoiceLM(_CFG).half().eval().use_fused_kernels()
    results = []
    for rows in rows_list:
        ids, audio, _, _ = inputs(rows, exact=True, device="cuda")
        ranges = KeyRanges(*key_ranges(rows, "cuda"))
        targets = torch.arange(rows // 2, device="cuda")  # as many rows as the runner's 2H, where they are is moot
        graphs, logits = {}, {}
        for name, fused in (("fused", True), ("ops", False)):
            lm.fused = fused  # the embedding only: the layers' kernels stay fused

            def step():
                return lm(ids, audio, ranges, rows=targets)

            with torch.inference_mode():
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    step()
                torch.cuda.current_stream().wait_stream(side)
                graphs[name] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[name]):
                    logits[name] = step()
        times = {name: [] for name in graphs}
        for _ in range(replays):
            for name, graph in graphs.items():
                times[name].append(replay_us(graph, replays=1) / 1000)
        ms = {name: statistics.median(t) for name, t in times.items()}
        moved = (logits["fused"].float() - logits["ops"].float()).abs().max().item()
        results.append({"rows": rows, "fused_ms": ms["fused"], "ops_ms": ms["ops"], "logits_max_diff": moved})
        del graphs, logits
    lm.fused = True
    return results


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 2
    failures = [f for rows in args.rows for f in check(rows, device="cuda")]
    if failures:
        print("\n".join(failures))
        return 1
    print(f"{torch.cuda.get_device_name()}: us per call from a CUDA graph, RANDOM tables")
    print("| rows | PyTorch ops (kernels) | fused (kernels) | x ops |\n|---|---|---|---|")
    results = []
    for rows in args.rows:
        r = time_rows(rows)
        results.append(r)
        print(f"| {rows} | {r['ops_us']:.2f} ({r['ops_kernels']}) | {r['fused_us']:.2f} ({r['fused_kernels']}) | "
              f"{r['fused_us'] / r['ops_us']:.2f} |")
    steps = model_steps(args.model_rows)
    print("\nmodel step, ms from CUDA graphs replayed alternately (RANDOM weights)")
    print("| rows (layout) | embedding ops | fused | saved per step | logits max diff |\n|---|---|---|---|---|")
    for r in steps:
        print(f"| {r['rows']} ({'+'.join(map(str, LAYOUTS[r['rows']]))}) | {r['ops_ms']:.3f} | {r['fused_ms']:.3f} | "
              f"{1000 * (r['ops_ms'] - r['fused_ms']):.1f} us | {r['logits_max_diff']:.2e} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "results": results, "model_steps": steps}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
