"""The CUTLASS configurations gemm.cu and gemm_swiglu.cu are compiled for: one object, one exported function each."""
from dataclasses import dataclass

INTERLEAVE = 8  # gemm_swiglu.cu's weight: 8 gate rows, then the 8 up rows of the same outputs, and so on


@dataclass(frozen=True)
class Config:
    """A tile (CUTLASS's M, N, K), a thread-block cluster (M, N), the mainloop schedule, the tile scheduler.

    swap computes y^T = W @ x^T: CUTLASS's M is the weight's N rows, its N the activation rows.
    """

    name: str
    tile: tuple[int, int, int]
    cluster: tuple[int, int]
    pingpong: bool = False  # else cooperative (two consumer warp groups share each tile)
    stream_k: bool = False  # else the persistent data-parallel scheduler
    swap: bool = False
    swiglu: bool = False  # gemm_swiglu.cu: y = silu(gate) * up in the epilogue, from the interleaved gate_up weight

    def defines(self) -> list[str]:
        """The -D options config.h reads."""
        values = {"NAME": self.name, "TM": self.tile[0], "TN": self.tile[1], "TK": self.tile[2],
                  "CM": self.cluster[0], "CN": self.cluster[1], "PINGPONG": int(self.pingpong),
                  "STREAMK": int(self.stream_k), "SWAP": int(self.swap)}
        if self.swiglu:
            values["INTERLEAVE"] = INTERLEAVE
        return [f"-DVD_{key}={value}" for key, value in values.items()]

    @property
    def source(self) -> str:
        return "gemm_swiglu.cu" if self.swiglu else "gemm.cu"

    @property
    def symbol(self) -> str:
        return f"vd_gemm_{self.name}"


CONFIGS = (
    Config("coop_128x128_c1x1", (128, 128, 64), (1, 1)),
    Config("coop_128x128_c2x1", (128, 128, 64), (2, 1)),
    Config("coop_128x128_c1x2", (128, 128, 64), (1, 2)),
    Config("coop_128x256_c1x1", (128, 256, 64), (1, 1)),
    Config("coop_128x64_c1x1", (128, 64, 64), (1, 1)),
    Config("coop_128x64_c2x1", (128, 64, 64), (2, 1)),
    Config("pp_64x128_c1x1", (64, 128, 64), (1, 1), pingpong=True),
    Config("pp_64x128_c2x1", (64, 128, 64), (2, 1), pingpong=True),
    Config("pp_64x64_c1x1", (64, 64, 64), (1, 1), pingpong=True),
    Config("pp_64x256_c1x1", (64, 256, 64), (1, 1), pingpong=True),
    Config("sk_128x64_c1x1", (128, 64, 64), (1, 1), stream_k=True),
    Config("sk_128x128_c1x1", (128, 128, 64), (1, 1), stream_k=True),
    Config("swap_coop_128x64_c1x1", (128, 64, 64), (1, 1), swap=True),
    Config("coop_256x128_c1x1", (256, 128, 64), (1, 1)),
    Config("coop_128x64k128_c1x1", (128, 64, 128), (1, 1)),
    Config("pp_64x64_c2x1", (64, 64, 64), (2, 1), pingpong=True),
    Config("pp_64x128_c1x2", (64, 128, 64), (1, 2), pingpong=True),
    Config("pp_64x32_c1x1", (64, 32, 64), (1, 1), pingpong=True),
    Config("pp_64x32_c1x2", (64, 32, 64), (1, 2), pingpong=True),
    Config("pp_64x64_c1x2", (64, 64, 64), (1, 2), pingpong=True),
    Config("pp_64x64k128_c1x1", (64, 64, 128), (1, 1), pingpong=True),
    Config("pp_64x192_c1x1", (64, 192, 64), (1, 1), pingpong=True),
    Config("coop_128x192_c1x1", (128, 192, 64), (1, 1)),
    Config("swiglu_coop_128x128_c1x1", (128, 128, 64), (1, 1), swiglu=True),
    Config("swiglu_coop_128x128_c2x1", (128, 128, 64), (2, 1), swiglu=True),
    Config("swiglu_coop_128x256_c1x1", (128, 256, 64), (1, 1), swiglu=True),
    Config("swiglu_pp_64x128_c1x1", (64, 128, 64), (1, 1), pingpong=True, swiglu=True),
    Config("swiglu_pp_64x256_c1x1", (64, 256, 64), (1, 1), pingpong=True, swiglu=True),
)
BY_NAME = {config.name: config for config in CONFIGS}
