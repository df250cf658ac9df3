"""The codec's decode on a GPU: what a length costs the first time it is decoded (cuDNN makes its convolution plans
per shape, and PyTorch keeps them per thread), with cuDNN and without; and several pieces decoded in one batch
against one by one, for equal lengths and for lengths padded with zeros to the longest, each against a reference
without TF32 (the decode's own rounding is TF32's where cuDNN may use it).

    python -m tools.bench_decode_shapes --model PATH [--lengths 37,53,71,89,113,131] [--pieces 100,100,100,100]

Prints one JSON line per part. tools/kernels/bench_decode.py times the fused decode against plain PyTorch."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.codec import AudioCodec
from tools.kernels.bench_decode import random_codes, timed_ms


def decode_batch(codec: AudioCodec, pieces: list[torch.Tensor]) -> list[torch.Tensor]:
    """Waveforms of the token pieces (C, T_i), decoded in one batch (AudioCodec.decode_many for equal lengths),
    each piece's features padded with zeros to the longest."""
    feats = [codec.fc2(codec.quantizer.decode(codes)) for codes in pieces]  # (T_i, A)
    longest = max(f.shape[0] for f in feats)
    if all(f.shape[0] == longest for f in feats):
        return codec.decode_many(pieces)
    x = torch.stack([F.pad(f.t(), (0, longest - f.shape[0])) for f in feats])  # (B, A, T)
    waves = codec.acoustic_decoder(x)[:, 0]  # (B, T * hop)
    return [w[: f.shape[0] * codec.hop_length] for w, f in zip(waves, feats)]


def new_lengths(codec: AudioCodec, lengths: list[int], cudnn: bool) -> dict:
    """ms of the first decode at each new length and of the second, median over the lengths."""
    firsts, agains = [], []
    with torch.inference_mode(), torch.backends.cudnn.flags(enabled=cudnn):
        for frames in lengths:
            c = random_codes(codec, frames)
            firsts.append(timed_ms(lambda: codec.decode(c)))
            agains.append(timed_ms(lambda: codec.decode(c)))
    firsts.sort()
    agains.sort()
    return {"part": "new lengths", "cudnn": cudnn, "lengths": lengths, "first_ms_median": firsts[len(firsts) // 2],
            "again_ms_median": agains[len(agains) // 2], "first_ms": firsts, "again_ms": agains}


def batched(codec: AudioCodec, frames: list[int]) -> dict:
    """Batched against one by one: max |difference|, each way's max error against the no-TF32 reference, times."""
    pieces = [random_codes(codec, n) for n in frames]
    with torch.inference_mode():
        alone = [codec.decode(c) for c in pieces]
        together = decode_batch(codec, pieces)
        ms_alone = timed_ms(lambda: [codec.decode(c) for c in pieces])
        ms_together = timed_ms(lambda: decode_batch(codec, pieces))
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            matmul = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False
            exact = [codec.decode(c) for c in pieces]
            torch.backends.cuda.matmul.allow_tf32 = matmul
    alone_err = [float((a - e).abs().max()) for a, e in zip(alone, exact)]
    return {"part": "batched", "frames": frames,
            "max_diff": max(float((a - b).abs().max()) for a, b in zip(alone, together)),
            "alone_err": max(alone_err),
            "batched_err": max(float((b - e).abs().max()) for b, e in zip(together, exact)),
            # per piece: its last frames where batched and alone differ by more than twice alone's own rounding
            "frames_apart_at_end": [frames_apart(a, b, 2 * err, codec.hop_length)
                                    for a, b, err in zip(alone, together, alone_err)],
            "peak_abs": max(float(e.abs().max()) for e in exact), "alone_ms": ms_alone, "batched_ms": ms_together}


def frames_apart(a: torch.Tensor, b: torch.Tensor, rounding: float, hop: int) -> int:
    """How many frames at the end of `a` hold samples further than `rounding` from `b`'s (0: none)."""
    apart = ((a - b).abs() > rounding).nonzero()
    return 0 if apart.numel() == 0 else -(-(a.numel() - int(apart.min())) // hop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint folder (its audio_tokenizer/ is read)")
    parser.add_argument("--lengths", default="37,53,71,89,113,131,157")
    parser.add_argument("--pieces", default="100,100,100,100;100,80,60,40")
    args = parser.parse_args(argv)
    codec = AudioCodec.load(Path(args.model) / "audio_tokenizer", "cuda")
    with torch.inference_mode():
        codec.decode(random_codes(codec, 20))  # the handles and this thread's first plans
    lengths = [int(n) for n in args.lengths.split(",")]
    print(json.dumps(new_lengths(codec, lengths, cudnn=True)), flush=True)
    print(json.dumps(new_lengths(codec, [n + 1 for n in lengths], cudnn=False)), flush=True)
    for group in args.pieces.split(";"):
        print(json.dumps(batched(codec, [int(n) for n in group.split(",")])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
