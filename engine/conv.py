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


class CudnnChoice:
    """Which decodes run their convolutions with cuDNN on CUDA, remembered per thread as PyTorch keeps cuDNN's
    plans. A shape (pieces, frames) a thread meets for the first time goes without cuDNN, so no decode waits for
    plans (an H200: 8-38 ms for 20-1500 frames instead of 57-67 ms), and so does every decode of up to
    `native_up_to` frames in all; a longer shape's later decodes on that thread go with cuDNN (plans built on the
    second, then 7-12 ms where ATen's own kernels take 9-38: BENCHMARKS.md, issue 23)."""

    def __init__(self, native_up_to: int = NATIVE_UP_TO_FRAMES):
        self.native_up_to = native_up_to
        self._threads = threading.local()  # .shapes: the (pieces, frames) this thread has decoded above the limit

    def __call__(self, *, pieces: int, frames: int) -> bool:
        """Whether this thread's decode of `pieces` pieces of `frames` frames uses cuDNN; notes the shape."""
        if pieces * frames <= self.native_up_to:
            return False
        shapes = self._threads.__dict__.setdefault("shapes", set())
        if (pieces, frames) in shapes:
            return True
        shapes.add((pieces, frames))
        return False

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
