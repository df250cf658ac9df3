"""The codec's decode on a GPU by each path of the decoder's convolutions (engine/conv.py's ConvPath: ATen's own
kernels, cuDNN in TF32, cuDNN in full float32): what a shape (pieces x frames) costs the first time a thread
decodes it and warm, for a stream's first pieces (20-200 frames), its later ones (200-1500) and batches of equal
pieces, and how far each cuDNN path's output is from ATen's (full float32); the peak GPU memory of a decode; whether
plans made on one thread serve another; and what cuDNN's own settings do to a new shape's cost (in fresh processes
where they are read at start).

    python -m tools.bench_decode_shapes --model PATH [--short 23,37,...] [--long 233,...] [--batched 2x97,...]
        [--memory 1x1499,...] [--runs 7] [--settings]

PATH holds audio_tokenizer/ (`python -m tools.make_checkpoint --codec-only PATH` writes one at the released sizes).
Everything runs on one thread made for it, as the app's GPU worker decodes on its job threads (the memory part on
another, where every shape is new). Prints one JSON line per measurement."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from unittest import mock

import torch

from engine.codec import AudioCodec
from engine.conv import ConvPath
from engine.lm.checkpoint import CODEC_DIR
from tools.kernels.bench_decode import random_codes, timed_ms

DEVICE = "cuda"
PATHS = tuple(ConvPath)  # ATen's own first: cuDNN's first decodes then find the allocator as warm as its did
MIB = 2**20
SETTINGS = {  # read by PyTorch or CUDA once per process: each in a fresh one
    "default": {},
    "heuristic mode B": {"TORCH_CUDNN_USE_HEURISTIC_MODE_B": "1"},
    "eager module loading": {"CUDA_MODULE_LOADING": "EAGER"},
}


def forced(codec: AudioCodec, path: ConvPath):
    """Every decode in the block takes `path`, whatever the codec would choose."""
    return mock.patch.object(codec, "conv_path", lambda *, pieces, frames: path)


def key(path: ConvPath) -> str:
    """The path's name in the JSON lines' keys."""
    return path.value.replace(" ", "_")


def decode(codec: AudioCodec, pieces: list[torch.Tensor]) -> list[torch.Tensor]:
    return codec.decode_many(pieces) if len(pieces) > 1 else [codec.decode(pieces[0])]


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def shape_costs(codec: AudioCodec, batch: int, frames: int, runs: int) -> dict:
    """A shape new to this thread: each path's first decode (in PATHS' order), then warm decodes alternating between
    the paths; each cuDNN path's output's largest difference from ATen's own."""
    pieces = [random_codes(codec, frames) for _ in range(batch)]
    out = {"part": "shape", "batch": batch, "frames": frames}
    for path in PATHS:
        with forced(codec, path):
            out[f"{key(path)}_first_ms"] = timed_ms(lambda: decode(codec, pieces))
    warm: dict[ConvPath, list[float]] = {path: [] for path in PATHS}
    for _ in range(runs):
        for path in PATHS:
            with forced(codec, path):
                warm[path].append(timed_ms(lambda: decode(codec, pieces)))
    for path, times in warm.items():
        out[f"{key(path)}_warm_ms"] = statistics.median(times)
        out[f"{key(path)}_warm_min_ms"] = min(times)
    waves = {}
    for path in PATHS:
        with forced(codec, path):
            waves[path] = torch.cat(decode(codec, pieces))
    for path in PATHS[1:]:
        out[f"{key(path)}_max_abs_diff"] = float((waves[path] - waves[ConvPath.NATIVE]).abs().max())
    out["peak_abs"] = float(waves[ConvPath.NATIVE].abs().max())
    return out


def peak_memory(codec: AudioCodec, batch: int, frames: int) -> dict:
    """Each path's peak GPU memory over one decode of a shape, in MiB above what was allocated before it (the
    weights): its first decode on the thread (cuDNN builds its plans then) and the next."""
    pieces = [random_codes(codec, frames) for _ in range(batch)]
    out = {"part": "memory", "batch": batch, "frames": frames}
    for path in PATHS:
        with forced(codec, path):
            for when in ("first", "again"):
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
                decode(codec, pieces)
                torch.cuda.synchronize()
                out[f"{key(path)}_{when}_peak_mib"] = (torch.cuda.max_memory_allocated() - before) / MIB
    return out


def device_line(codec: AudioCodec) -> dict:
    """The GPU and its memory with the codec loaded (what engine/lm/budget.py's share is taken of, with the LM)."""
    free, total = torch.cuda.mem_get_info()
    return {"part": "device", "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "total_mib": total / MIB, "free_mib": free / MIB,
            "codec_weights_mib": torch.cuda.memory_allocated() / MIB}


def on_new_thread(fn) -> None:
    """fn() on a thread made for it, as the app's GPU worker decodes on its job threads (cuDNN's plans are per
    thread: every shape is new there); its error is raised here."""
    errors = []

    def run() -> None:
        try:
            fn()
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=run, name="decoder")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def across_threads(codec: AudioCodec, frames: int) -> dict:
    """cuDNN's plans for one shape made on this thread, then the same shape on a new thread."""
    codes = [random_codes(codec, frames)]
    out = {"part": "threads", "frames": frames}
    with forced(codec, ConvPath.CUDNN_TF32):
        out["this_thread_first_ms"] = timed_ms(lambda: decode(codec, codes))
        out["this_thread_again_ms"] = timed_ms(lambda: decode(codec, codes))

        def other() -> None:
            out["new_thread_first_ms"] = timed_ms(lambda: decode(codec, codes))
            out["new_thread_again_ms"] = timed_ms(lambda: decode(codec, codes))

        on_new_thread(other)
    return out


def cudnn_firsts(codec: AudioCodec, lengths: list[int], label: str, path: ConvPath = ConvPath.CUDNN_TF32) -> dict:
    """cuDNN's first decode at each length (new to this thread), and the host memory its plans took."""
    before = rss_mib()
    with forced(codec, path):
        firsts = [timed_ms(lambda: decode(codec, [random_codes(codec, n)])) for n in lengths]
    return {"part": "cudnn firsts", "setting": label, "lengths": lengths, "first_ms": firsts,
            "first_ms_median": statistics.median(firsts), "rss_mib_per_shape": (rss_mib() - before) / len(lengths)}


def with_flags(codec: AudioCodec, lengths: list[int]) -> list[dict]:
    """cuDNN's first decodes under its deterministic flag (process-wide: only here, never in the app), and in full
    float32."""
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True):
        deterministic = cudnn_firsts(codec, [n + 1 for n in lengths], "deterministic")
    return [deterministic, cudnn_firsts(codec, [n + 2 for n in lengths], "fp32", ConvPath.CUDNN_FP32)]


def load(model: Path) -> AudioCodec:
    """The codec as Engine.load makes it: AudioCodec.load, then its warm-up, which compiles every variant of the fused
    Snake (else the first decode at an odd length pays Triton 1-2 s); then a small decode on each cuDNN path, which
    loads cuDNN's libraries and makes its handle."""
    codec = AudioCodec.load(model / CODEC_DIR, DEVICE)
    codec.warm_up()
    for path in PATHS[1:]:
        with forced(codec, path):
            decode(codec, [random_codes(codec, 20)])
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


def batches(text: str) -> list[tuple[int, int]]:
    """'4x251,8x113' -> [(4, 251), (8, 113)]: pieces x frames."""
    return [(int(pieces), int(frames)) for pieces, frames in (s.split("x") for s in text.split(",") if s)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="folder holding audio_tokenizer/")
    parser.add_argument("--short", default="23,37,53,71,89,113,131,157,179,199", help="a stream's first pieces")
    parser.add_argument("--long", default="233,311,409,521,677,809,1013,1249,1499", help="its later pieces")
    parser.add_argument("--batched", default="2x97,4x97,2x251,4x251,8x113", help="PIECESxFRAMES decoded together")
    parser.add_argument("--memory", default="1x1499,4x375,8x187", help="PIECESxFRAMES whose peak memory is read")
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
            print(json.dumps(device_line(codec)), flush=True)
            for batch, frames in [(1, n) for n in ints(args.short) + ints(args.long)] + batches(args.batched):
                print(json.dumps(shape_costs(codec, batch, frames, args.runs)), flush=True)
            print(json.dumps(across_threads(codec, 61)), flush=True)

            def memory() -> None:
                for batch, frames in batches(args.memory):
                    print(json.dumps(peak_memory(codec, batch, frames)), flush=True)

            on_new_thread(memory)  # where every shape is new, even those timed above
            if args.settings:
                for line in with_flags(codec, [n + 2 for n in ints(args.short)]):
                    print(json.dumps(line), flush=True)
        if args.settings:
            for line in in_fresh_processes(args.model, [n + 5 for n in ints(args.short)]):
                print(json.dumps(line), flush=True)

    try:
        on_new_thread(body)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
