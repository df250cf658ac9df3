"""The codec's decode on a GPU, the decoder's convolutions with cuDNN and without (engine/conv.py): what a shape
(pieces x frames) costs the first time a thread decodes it and warm, for a stream's first pieces (20-200 frames),
its later ones (200-1500) and batches of equal pieces; whether plans made on one thread serve another; and what
cuDNN's own settings do to a new shape's cost (in fresh processes where they are read at start).

    python -m tools.bench_decode_shapes --model PATH [--short 23,37,...] [--long 233,...] [--batched 2x97,...]
        [--runs 7] [--settings]

PATH holds audio_tokenizer/ (`python -m tools.make_checkpoint --codec-only PATH` writes one at the released sizes).
Everything runs on one thread made for it, as the app's GPU worker decodes on its job threads. Prints one JSON line
per measurement."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from unittest import mock

import torch

from engine.codec import AudioCodec
from tools.kernels.bench_decode import random_codes, timed_ms

PATHS = {"native": False, "cudnn": True}  # the decoder's convolutions without cuDNN, with it
SETTINGS = {  # read by PyTorch or CUDA once per process: each in a fresh one
    "default": {},
    "heuristic mode B": {"TORCH_CUDNN_USE_HEURISTIC_MODE_B": "1"},
    "eager module loading": {"CUDA_MODULE_LOADING": "EAGER"},
}


def forced(codec: AudioCodec, path: str):
    """Every decode in the block takes `path`, whatever the codec's CudnnChoice would choose."""
    return mock.patch.object(codec, "cudnn_choice", lambda *, pieces, frames: PATHS[path])


def decode(codec: AudioCodec, pieces: list[torch.Tensor]) -> list[torch.Tensor]:
    return codec.decode_many(pieces) if len(pieces) > 1 else [codec.decode(pieces[0])]


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def shape_costs(codec: AudioCodec, batch: int, frames: int, runs: int) -> dict:
    """A shape new to this thread: each path's first decode (native first, so that cuDNN's finds the allocator as
    warm as native's did), then warm decodes alternating between the paths; their outputs' largest difference."""
    pieces = [random_codes(codec, frames) for _ in range(batch)]
    out = {"part": "shape", "batch": batch, "frames": frames}
    for path in PATHS:
        with forced(codec, path):
            out[f"{path}_first_ms"] = timed_ms(lambda: decode(codec, pieces))
    warm: dict[str, list[float]] = {path: [] for path in PATHS}
    for _ in range(runs):
        for path in PATHS:
            with forced(codec, path):
                warm[path].append(timed_ms(lambda: decode(codec, pieces)))
    for path, times in warm.items():
        out[f"{path}_warm_ms"] = statistics.median(times)
        out[f"{path}_warm_min_ms"] = min(times)
    waves = {}
    for path in PATHS:
        with forced(codec, path):
            waves[path] = torch.cat(decode(codec, pieces))
    out["max_abs_diff"] = float((waves["native"] - waves["cudnn"]).abs().max())
    out["peak_abs"] = float(waves["cudnn"].abs().max())
    return out


def across_threads(codec: AudioCodec, frames: int) -> dict:
    """cuDNN's plans for one shape made on this thread, then the same shape on a new thread."""
    codes = [random_codes(codec, frames)]
    out = {"part": "threads", "frames": frames}
    with forced(codec, "cudnn"):
        out["this_thread_first_ms"] = timed_ms(lambda: decode(codec, codes))
        out["this_thread_again_ms"] = timed_ms(lambda: decode(codec, codes))

        def other() -> None:
            out["new_thread_first_ms"] = timed_ms(lambda: decode(codec, codes))
            out["new_thread_again_ms"] = timed_ms(lambda: decode(codec, codes))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    return out


def cudnn_firsts(codec: AudioCodec, lengths: list[int], label: str) -> dict:
    """cuDNN's first decode at each length (new to this thread), and the host memory its plans took."""
    before = rss_mib()
    with forced(codec, "cudnn"):
        firsts = [timed_ms(lambda: decode(codec, [random_codes(codec, n)])) for n in lengths]
    return {"part": "cudnn firsts", "setting": label, "lengths": lengths, "first_ms": firsts,
            "first_ms_median": statistics.median(firsts), "rss_mib_per_shape": (rss_mib() - before) / len(lengths)}


def with_flags(codec: AudioCodec, lengths: list[int]) -> list[dict]:
    """cuDNN's first decodes under torch.backends.cudnn flags (process-wide: only here, never in the app)."""
    out = []
    for label, flags in (("deterministic", {"deterministic": True}), ("no tf32", {"allow_tf32": False})):
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, **{"deterministic": False,
                                                                             "allow_tf32": True, **flags}):
            out.append(cudnn_firsts(codec, [n + len(out) + 1 for n in lengths], label))
    return out


def load(model: Path) -> AudioCodec:
    codec = AudioCodec.load(model / "audio_tokenizer", "cuda")
    with torch.inference_mode():
        for path in PATHS:
            with forced(codec, path):
                decode(codec, [random_codes(codec, 20)])  # the handles and the kernels' first loading
    return codec


def in_fresh_processes(model: Path, lengths: list[int]) -> list[dict]:
    out = []
    for label, env in SETTINGS.items():
        run = subprocess.run([sys.executable, "-m", "tools.bench_decode_shapes", "--model", str(model),
                              "--firsts-only", ",".join(map(str, lengths)), "--label", label],
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
        lines = run.stdout.strip().splitlines()
        out.append(json.loads(lines[-1]) if run.returncode == 0 and lines
                   else {"part": "cudnn firsts", "setting": label, "error": run.stderr[-2000:]})
    return out


def ints(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="folder holding audio_tokenizer/")
    parser.add_argument("--short", default="23,37,53,71,89,113,131,157,179,199", help="a stream's first pieces")
    parser.add_argument("--long", default="233,311,409,521,677,809,1013,1249,1499", help="its later pieces")
    parser.add_argument("--batched", default="2x97,4x97,2x251,4x251,8x113", help="PIECESxFRAMES decoded together")
    parser.add_argument("--runs", type=int, default=7, help="warm decodes of each path per shape")
    parser.add_argument("--settings", action="store_true", help="also cuDNN's first decodes under other settings")
    parser.add_argument("--firsts-only", type=ints, help=argparse.SUPPRESS)  # one fresh process's part
    parser.add_argument("--label", default="default", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    def body() -> None:
        with torch.inference_mode():
            codec = load(args.model)
            if args.firsts_only:
                print(json.dumps(cudnn_firsts(codec, args.firsts_only, args.label)), flush=True)
                return
            shapes = [(1, n) for n in ints(args.short) + ints(args.long)]
            shapes += [tuple(int(v) for v in s.split("x")) for s in args.batched.split(",") if s]
            for batch, frames in shapes:
                print(json.dumps(shape_costs(codec, batch, frames, args.runs)), flush=True)
            print(json.dumps(across_threads(codec, 61)), flush=True)
            if args.settings:
                for line in with_flags(codec, [n + 2 for n in ints(args.short)]):
                    print(json.dumps(line), flush=True)
        if args.settings:
            for line in in_fresh_processes(args.model, [n + 5 for n in ints(args.short)]):
                print(json.dumps(line), flush=True)

    failed = []

    def guarded() -> None:
        try:
            body()
        except BaseException as err:  # reported by the exit status; the traceback is printed here
            failed.append(err)
            raise

    thread = threading.Thread(target=guarded, name="decoder")  # the app decodes on its worker's job threads
    thread.start()
    thread.join()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
