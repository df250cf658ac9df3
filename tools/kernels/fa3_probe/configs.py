"""The FlashAttention-3 kernels kernel.cu is compiled for: one object (and one exported function) each.

All are FA3's sm90 forward at head_dim 128, variable-length (cu_seqlens), non-causal, one split. FA3's own
heuristic (hopper/heuristics.h, should_pack_gqa) always packs the query heads of a KV head into one tile when
the call is variable-length; the unpacked kernel is built beside it to see what packing is worth here.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """e4m3: q, k, v in float8 e4m3 (FA3 writes bf16 out) instead of fp16; pack_gqa: FA3's PackGQA."""

    name: str
    e4m3: bool
    pack_gqa: bool

    def defines(self) -> list[str]:
        """The -D options kernel.cu and entry.cu read."""
        return [f"-DVD_NAME={self.name}", f"-DVD_E4M3={int(self.e4m3)}", f"-DVD_PACKGQA={int(self.pack_gqa)}"]

    @property
    def symbol(self) -> str:
        return f"vd_fa3_{self.name}"


CONFIGS = (
    Config("fp16_packgqa", e4m3=False, pack_gqa=True),  # what FA3's heuristic runs for a varlen call
    Config("fp16", e4m3=False, pack_gqa=False),
    Config("e4m3_packgqa", e4m3=True, pack_gqa=True),
)
BY_NAME = {config.name: config for config in CONFIGS}
