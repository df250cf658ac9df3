"""Time the codec's decode on a GPU and count its CPU-side kernel launches, fused path against plain PyTorch.

Run on a CUDA machine from the repository root:

    python -m tools.kernels.bench_decode [--model DIR] [--frames 75 290 625] [--dtype fp32|fp16] [--runs 20]

`--model` is an OmniVoice folder or hub id (default: as the engine resolves it; `engine/data/demo_model`
works too). The codec runs in fp32 by default, as the engine loads it. For each length T (25 frames
per second of audio) and each path ("plain": PyTorch as transformers computes it; "fused": the
Triton Snake with the conv bias and residual folded in) it prints:

- launches: kernel launches the CPU issues per decode (cudaLaunchKernel / cuLaunchKernel calls seen
  by torch.profiler), and memcpy/memset calls beside them;
- warm ms: median wall time of a decode, launch to synchronisation;
- cold ms: the first decode at a length never decoded before (cuDNN builds plans per shape; a new
  request usually has a new length, so this is what the first audio of a request waits for);
- diff: the fused output's largest difference to the plain one (0 means bit-identical).

Then, for the longest T, both paths' launches by the PyTorch operation they come from (the outermost
one; the innermost where it differs), and the kernels launched most.
"""
import argparse
import statistics
import time
from collections import Counter
from functools import partial
from unittest import mock

import torch
import triton
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import engine.codec
from engine.codec import AudioCodec
from engine.lm.checkpoint import resolve_checkpoint

PATHS = ("plain", "fused")
LAUNCH = "LaunchKernel"  # cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx
COPY = ("Memcpy", "Memset")


def on_path(name: str):
    """Run the codec's plain-PyTorch or fused path, whatever this machine would pick."""
    return mock.patch.object(engine.codec, "use_triton", lambda x: name == "fused" and x.is_cuda)


def random_codes(codec: AudioCodec, frames: int) -> torch.Tensor:
    return torch.randint(0, codec.cfg.codebook_size, (codec.num_codebooks, frames), device=codec.device)


def timed_ms(fn) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - start)


def _aten_ancestors(event) -> list[str]:
    names, parent = [], event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            names.append(parent.name)
        parent = parent.cpu_parent
    return names  # innermost first


def profile_decode(codec: AudioCodec, codes: torch.Tensor):
    """(launches, memcpy/memset calls, launches by op, kernels by name) of one decode."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        codec.decode(codes)
        torch.cuda.synchronize()
    by_op, kernels, launches, copies = Counter(), Counter(), 0, 0
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            kernels[event.name] += 1
        elif LAUNCH in event.name:
            launches += 1
            ops = _aten_ancestors(event)
            if not ops:
                by_op["(no aten op: Triton)"] += 1
            else:
                by_op[ops[-1] if ops[-1] == ops[0] else f"{ops[-1]} > {ops[0]}"] += 1
        elif any(k in event.name for k in COPY) and event.device_type == DeviceType.CPU:
            copies += 1
    return launches, copies, by_op, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="OmniVoice folder or hub id (default: as the engine resolves it)")
    parser.add_argument("--frames", type=int, nargs="+", default=[75, 290, 625])
    parser.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    dtype = {"fp32": torch.float32, "fp16": torch.float16}[args.dtype]
    codec = AudioCodec.load(resolve_checkpoint(args.model) / "audio_tokenizer", "cuda", dtype)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, codec {args.dtype}, "
          f"the decodes cuDNN gets: {engine.codec.DECODER_CUDNN.value}")
    torch.manual_seed(0)
    for name in PATHS:  # compile every Snake variant and build the shared plans once, off the clock
        with on_path(name):
            codec.decode(random_codes(codec, 3))
            codec.decode(random_codes(codec, 700))
    print(f"{'T':>5} {'audio s':>7} {'path':6} {'launches':>8} {'copies':>6} {'warm ms':>8} {'cold ms':>8} {'diff':>9}")
    details = {}
    for n, frames in enumerate(args.frames):
        codes = random_codes(codec, frames)
        outputs = {}
        for p, name in enumerate(PATHS):
            with on_path(name):
                fresh = random_codes(codec, frames + 1 + 2 * n + p)  # a length no path decoded yet
                cold = timed_ms(partial(codec.decode, fresh))
                outputs[name] = codec.decode(codes)
                warm = statistics.median(timed_ms(partial(codec.decode, codes)) for _ in range(args.runs))
                launches, copies, by_op, kernels = profile_decode(codec, codes)
            details[name] = (by_op, kernels)
            diff = (outputs[name].float() - outputs["plain"].float()).abs().max().item()
            print(f"{frames:5d} {frames / codec.frame_rate:7.1f} {name:6} {launches:8d} {copies:6d} "
                  f"{warm:8.2f} {cold:8.2f} {diff:9.2g}")
    for name, (by_op, kernels) in details.items():
        print(f"\n{name}, T = {args.frames[-1]}: launches by op")
        for op, count in by_op.most_common():
            print(f"  {count:5d}  {op}")
        print(f"{name}: kernels launched most")
        for kernel, count in kernels.most_common(12):
            print(f"  {count:5d}  {kernel[:110]}")


if __name__ == "__main__":
    main()
