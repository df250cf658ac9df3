"""The CUTLASS configurations gemm.cu is compiled for: one object (and one exported function) each."""
from dataclasses import dataclass


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

    def defines(self) -> list[str]:
        """The -D options gemm.cu reads."""
        values = {"NAME": self.name, "TM": self.tile[0], "TN": self.tile[1], "TK": self.tile[2],
                  "CM": self.cluster[0], "CN": self.cluster[1], "PINGPONG": int(self.pingpong),
                  "STREAMK": int(self.stream_k), "SWAP": int(self.swap)}
        return [f"-DVD_{key}={value}" for key, value in values.items()]

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
)
BY_NAME = {config.name: config for config in CONFIGS}
