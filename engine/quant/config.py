"""How to quantize: one `QuantConfig` for every scheme (SVDQuant W4A4, W8A8 int8, W8A8 FP8), stored in
the quantized file's metadata so loading never guesses from a file name."""
from __future__ import annotations

import dataclasses
import fnmatch
import json
from dataclasses import dataclass

from torch import nn

from kernels.w4a4_ref import GROUP

TARGET_NAMES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
FP8_ALIGN = 16  # _scaled_mm needs K and N to be multiples of 16


@dataclass(frozen=True)
class QuantConfig:
    """How to quantize: SVDQuant rank and smoothing, and which layers stay 16-bit or go W8A8.

    `keep_fp16`, `w8a8` (int8) and `fp8` (W8A8 FP8) are fnmatch patterns on module names (e.g.
    "layers.0.*", "*.down_proj"; `fp8=("*",)` makes a whole-model FP8 config). `smooth_alpha=None`
    turns smoothing off and `rank=0` the W4A4 low-rank branch (plain RTN W4A4; the GPU kernels need a
    rank that is a multiple of 16). FP8 layers have their own low-rank branch, off by default
    (`fp8_rank=0`): 8-bit activations need no help from it.
    """

    rank: int = 32
    group_size: int = GROUP
    smooth_alpha: float | None = 0.5
    keep_fp16: tuple[str, ...] = ()
    w8a8: tuple[str, ...] = ()
    fp8: tuple[str, ...] = ()
    fp8_rank: int = 0

    def __post_init__(self):
        if self.group_size != GROUP:
            raise ValueError(f"group_size must be {GROUP}: the numerics contract and the kernels are built for it")
        if self.rank < 0 or self.fp8_rank < 0:
            raise ValueError(f"ranks must be >= 0, got rank={self.rank}, fp8_rank={self.fp8_rank}")
        for patterns in ("keep_fp16", "w8a8", "fp8"):
            object.__setattr__(self, patterns, tuple(getattr(self, patterns)))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> QuantConfig:
        return cls(**json.loads(text))

    def scheme(self, name: str, linear: nn.Linear) -> str:
        """'fp16', 'w8a8', 'fp8' or 'w4a4' for the linear called `name` (shapes a kernel cannot take stay fp16)."""
        if any(fnmatch.fnmatchcase(name, p) for p in self.keep_fp16):
            return "fp16"
        if any(fnmatch.fnmatchcase(name, p) for p in self.w8a8):
            return "w8a8"
        if any(fnmatch.fnmatchcase(name, p) for p in self.fp8):
            aligned = linear.in_features % FP8_ALIGN == 0 and linear.out_features % FP8_ALIGN == 0
            return "fp8" if aligned else "fp16"
        return "w4a4" if linear.in_features % GROUP == 0 else "fp16"
