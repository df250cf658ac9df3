"""ctypes binding of the library build.py makes: FlashAttention-3's varlen forward on packed rows, by name.

The layout is the runner's: rows of several sequences packed one after another, q [rows, Hq, 128], k and v
[rows, Hkv, 128] (any row and head strides, e.g. views of the qkv projection's output), each sequence attending
to itself only, given by its cumulative bounds cu_seqlens [n + 1] (int32, 0 first, rows last). Calls take raw
device pointers and PyTorch's current stream, so they are captured into CUDA graphs like any kernel.
"""
import ctypes
import math
from pathlib import Path

import torch

from tools.kernels.fa3_probe.configs import BY_NAME, CONFIGS

HEAD_DIM = 128  # the only head size the kernels are built for
_INPUT = {False: torch.float16, True: torch.float8_e4m3fn}
_OUTPUT = {False: torch.float16, True: torch.bfloat16}  # FA3 writes its fp8 forward's result in bf16


class Fa3Error(RuntimeError):
    """A call the library refused (its status string)."""


def check_operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, *,
                   e4m3: bool) -> None:
    """ValueError unless q [rows, Hq, 128] and k, v [rows, Hkv, 128] (Hq a multiple of Hkv, the last dimension
    contiguous) are fp16 (float8 e4m3 if e4m3) and cu_seqlens is a contiguous int32 [n + 1], all on one CUDA
    device."""
    if q.dim() != 3 or q.shape[2] != HEAD_DIM:
        raise ValueError(f"q must be [rows, heads, {HEAD_DIM}], got {tuple(q.shape)}")
    rows, heads_q, _ = q.shape
    heads_kv = k.shape[1] if k.dim() == 3 else 0
    for name, t in (("k", k), ("v", v)):
        if t.dim() != 3 or t.shape[0] != rows or t.shape[1] != heads_kv or t.shape[2] != HEAD_DIM:
            raise ValueError(f"{name} must be [{rows}, Hkv, {HEAD_DIM}] like k, got {tuple(t.shape)}")
    if heads_q % heads_kv:
        raise ValueError(f"q's heads ({heads_q}) must be a multiple of k's ({heads_kv})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != _INPUT[e4m3] or t.stride(2) != 1:
            raise ValueError(f"{name} must be {_INPUT[e4m3]} with a contiguous last dimension, got {t.dtype} "
                             f"with strides {t.stride()}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2 or cu_seqlens.dtype != torch.int32 \
            or not cu_seqlens.is_contiguous():
        raise ValueError(f"cu_seqlens must be a contiguous int32 [n + 1], n >= 1, got {cu_seqlens.dtype} "
                         f"{tuple(cu_seqlens.shape)}")
    for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens", cu_seqlens)):
        if t.device.type != "cuda" or t.device != q.device:
            raise ValueError(f"{name} must be on q's CUDA device, got {t.device} (q on {q.device})")


class Fa3Probe:
    """The built library at `path`; `names` lists the configurations it holds."""

    def __init__(self, path: str | Path):
        if not Path(path).is_file():  # CDLL("") would load the running program
            raise FileNotFoundError(f"no FA3 library at {str(path)!r}: build it with "
                                    "python -m tools.kernels.fa3_probe.build --fa3 <flash-attention checkout>")
        self.lib = ctypes.CDLL(str(path))
        self.lib.vd_fa3_status_string.restype = ctypes.c_char_p
        self.lib.vd_fa3_status_string.argtypes = [ctypes.c_int]
        self.lib.vd_fa3_metadata_ints.restype = ctypes.c_int
        self.lib.vd_fa3_metadata_ints.argtypes = [ctypes.c_int]
        self.names = []
        for config in CONFIGS:
            try:
                run = getattr(self.lib, config.symbol)
            except AttributeError:  # built with --configs: not every configuration is there
                continue
            run.restype = ctypes.c_int
            run.argtypes = ([ctypes.c_void_p] * 6 + [ctypes.c_int] * 5 + [ctypes.c_int64] * 8
                            + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p])
            self.names.append(config.name)
        self._sms = {}

    def attention(self, name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                  longest: int, *, out: torch.Tensor | None = None) -> torch.Tensor:
        """softmax(q k^T / sqrt(128)) v within each sequence, as configuration `name` computes it, on the current
        stream; out [rows, Hq, 128] fp16 (bf16 for e4m3 inputs), allocated if None. longest: the longest
        sequence's rows (FA3's max_seqlen; a device-side bound is not read back, so a graph can hold the call)."""
        if name not in self.names:
            raise ValueError(f"{name} is not in this library ({', '.join(self.names)})")
        e4m3 = BY_NAME[name].e4m3
        check_operands(q, k, v, cu_seqlens, e4m3=e4m3)
        rows, heads_q, _ = q.shape
        sequences = cu_seqlens.numel() - 1
        if out is None:
            out = torch.empty(rows, heads_q, HEAD_DIM, dtype=_OUTPUT[e4m3], device=q.device)
        elif tuple(out.shape) != tuple(q.shape) or out.dtype != _OUTPUT[e4m3] or out.stride(2) != 1 \
                or out.device != q.device:
            raise ValueError(f"out must be {_OUTPUT[e4m3]} {tuple(q.shape)} on {q.device} with a contiguous last "
                             f"dimension, got {out.dtype} {tuple(out.shape)} on {out.device}")
        lse = torch.empty(heads_q, rows, dtype=torch.float32, device=q.device)  # FA3 writes it; not returned
        metadata = torch.empty(self.lib.vd_fa3_metadata_ints(sequences), dtype=torch.int32, device=q.device)
        if q.device not in self._sms:
            self._sms[q.device] = torch.cuda.get_device_properties(q.device).multi_processor_count
        status = getattr(self.lib, BY_NAME[name].symbol)(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), cu_seqlens.data_ptr(),
            sequences, rows, longest, heads_q, k.shape[1], *q.stride()[:2], *k.stride()[:2], *v.stride()[:2],
            *out.stride()[:2], 1 / math.sqrt(HEAD_DIM), metadata.data_ptr(), metadata.numel(),
            self._sms[q.device], torch.cuda.current_stream(q.device).cuda_stream)
        if status != 0:
            raise Fa3Error(f"{name}: {self.lib.vd_fa3_status_string(status).decode()}")
        return out
