"""A Conv1d / ConvTranspose1d module's convolution on CUDA, by the path asked per call: ATen's own kernels, or cuDNN
with or without TF32.

cuDNN builds execution plans for each input shape the first time it meets it, and PyTorch keeps them per thread
(and at most 10,000 of them, about 270 decoder shapes): 42-55 ms, once 1.3 s, for the codec's decoder on an H200,
paid by the first audio of every text whose first piece has a length new to the thread. ATen's own CUDA
convolution (im2col and a cuBLAS GEMM) builds nothing per shape and is as fast for short pieces, slower for long
ones (BENCHMARKS.md, issue 23); `AudioCodec` chooses per decode (`CudnnChoice`). cuDNN rounds float32 through TF32
by default (PyTorch's `torch.backends.cudnn.allow_tf32`): about 1e-3 on the codec's output, where ATen's GEMM
rounds as cuBLAS's float32 matmuls do (`torch.backends.cuda.matmul.allow_tf32`, off by default). Both choices are
arguments of ATen's `_convolution`, so they hold for this call alone: the process-wide flags stay as they are for
the other threads' convolutions.

Off CUDA the module's own functional call runs, so a CPU's output does not change by a bit.
"""
from __future__ import annotations

import math
import threading
from enum import Enum

import torch
import torch.nn.functional as F
from torch import nn

aten_convolution = torch.ops.aten._convolution.default


class ConvPath(Enum):
    """What computes a convolution on CUDA."""

    NATIVE = "native"  # ATen's own: im2col and a cuBLAS GEMM, no plans per shape
    CUDNN_TF32 = "cudnn"  # cuDNN, its products in TF32 (PyTorch's default for cuDNN)
    CUDNN_FP32 = "cudnn fp32"  # cuDNN in full float32


# Decodes of up to this many frames in all (pieces x frames) never use cuDNN: warm it is only about 1 ms faster
# there on an H200 (8.2 against 7.0 ms at 23-233 frames, 2.9 ms at 311), so its ~60 ms of plans never pay back.
NATIVE_UP_TO_FRAMES = 256
# A decode of F frames in all on an H200 (BENCHMARKS.md, "decode paths", issue 23: 311-1499 frames, 1-8 pieces):
# ATen's own kernels about 3 + 0.0235 F ms, cuDNN warm about 6 + 0.004 F ms, and cuDNN's first decode of a shape on a
# thread about PLANS_MS (57-67 ms measured at every size: its plans).
PLANS_MS = 60.0


def natives_before_cudnn(frames: int) -> int:
    """How many decodes of one shape of `frames` frames in all a thread makes without cuDNN before it builds cuDNN's
    plans for it: a ski rental. Each decode without cuDNN pays what cuDNN would save warm (its rent); building the plans
    pays PLANS_MS instead of one decode (the purchase); renting until the rent paid reaches the purchase never costs
    more than twice what the best choice in hindsight would, whether the shape comes back twice or a hundred times.
    311 frames: 17 decodes (3.1 ms of rent each against 50 ms of plans); 521: 7; 1013: 2; 1499 and longer: 1."""
    native_ms = native_decode_ms(frames)
    saving_ms = native_ms - cudnn_warm_decode_ms(frames)
    return max(1, math.ceil((PLANS_MS - native_ms) / saving_ms))


def native_decode_ms(frames: int) -> float:
    """A decode of `frames` frames in all with ATen's own kernels on an H200, by the fit above."""
    return 3.0 + 0.0235 * frames


def cudnn_warm_decode_ms(frames: int) -> float:
    """A decode of `frames` frames in all with cuDNN, its plans made, on an H200, by the fit above."""
    return 6.0 + 0.004 * frames


class CudnnChoice:
    """Which decodes run their convolutions with cuDNN on CUDA, counted per thread as PyTorch keeps cuDNN's plans. A
    decode of up to `native_up_to` frames in all never does; a longer shape (pieces, frames) goes without cuDNN for
    its first `natives_before_cudnn` decodes on a thread, so no decode waits ~60 ms for plans that its shape's few
    repeats would not pay back (an H200: 8-38 ms for 20-1500 frames without, 7-12 ms with cuDNN once its plans are
    made: BENCHMARKS.md, issue 23), and with cuDNN after that."""

    def __init__(self, native_up_to: int = NATIVE_UP_TO_FRAMES):
        self.native_up_to = native_up_to
        self._threads = threading.local()  # .decodes: {(pieces, frames): decodes so far} above the limit, this thread's

    def __call__(self, *, pieces: int, frames: int) -> bool:
        """Whether this thread's decode of `pieces` pieces of `frames` frames uses cuDNN; counts the decode."""
        if pieces * frames <= self.native_up_to:
            return False
        decodes = self._threads.__dict__.setdefault("decodes", {})
        made = decodes.get((pieces, frames), 0)
        decodes[(pieces, frames)] = made + 1
        return made >= natives_before_cudnn(pieces * frames)

    def __deepcopy__(self, memo: dict) -> CudnnChoice:
        """A copy (of a codec, e.g. a float64 one) remembers no shape: its threads have decoded nothing with it."""
        return CudnnChoice(self.native_up_to)


def convolve(conv: nn.Conv1d | nn.ConvTranspose1d, x: torch.Tensor, *, bias: torch.Tensor | None,
             path: ConvPath) -> torch.Tensor:
    """conv's convolution of x plus `bias` (None: none), on CUDA by `path`."""
    transposed = isinstance(conv, nn.ConvTranspose1d)
    if not x.is_cuda:
        if transposed:
            return F.conv_transpose1d(x, conv.weight, bias, conv.stride, conv.padding, conv.output_padding,
                                      conv.groups, conv.dilation)
        return F.conv1d(x, conv.weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)
    cudnn = torch.backends.cudnn
    return aten_convolution(
        x, conv.weight, bias, stride=conv.stride, padding=conv.padding, dilation=conv.dilation,
        transposed=transposed, output_padding=conv.output_padding, groups=conv.groups,
        # the process's settings, as the functional call passes them, but for cuDNN and TF32: the path's
        benchmark=cudnn.benchmark, deterministic=cudnn.deterministic or torch.are_deterministic_algorithms_enabled(),
        cudnn_enabled=cudnn.enabled and path is not ConvPath.NATIVE, allow_tf32=path is ConvPath.CUDNN_TF32)
