"""Does every Triton kernel the engine launches build for the GPUs VoiceDesk's users have? Compiles, for each
architecture, the kernels its quality modes reach there (`arch_builds`) and checks each against that architecture's
per-block shared memory and for register spills: `python -m tools.kernels.aot_archs [arch ...] [--json]` (default
every arch of `SHARED_MEMORY_PER_BLOCK`; exit status 1 when a build does not fit). No GPU needed (Triton's own
compiler, run without TRITON_INTERPRET). tests/kernels/test_arch_builds.py runs it, so a tile retuned for the H200
cannot silently stop launching on an RTX card (Triton refuses a launch asking more shared memory than the device has).
"""
import json
import re
import sys
from dataclasses import asdict, dataclass

from tools.kernels.aot import (
    Build,
    attention_builds,
    compile_build,
    fp8_builds,
    hifi_builds,
    int8_builds,
    resource_usage,
    spill_stores,
    w4a4_builds,
)

# The most shared memory one block may use (static + dynamic, opt-in), bytes: the largest shared-memory carveout
# per SM less the 1 KB the driver reserves per block. Carveouts from CUDA 13.0's cuda_occupancy.h (8.0: 164 KB;
# 8.6, 8.9 and 12.0: 100 KB; 9.0: 228 KB), as the Ampere tuning guide gives 8.6's (100 KB per SM, 99 KB per block).
SHARED_MEMORY_PER_BLOCK = {
    80: 163 * 1024,  # A100
    86: 99 * 1024,  # RTX 30, A10, A40
    89: 99 * 1024,  # L4, RTX 40
    90: 227 * 1024,  # H100, H200
    120: 99 * 1024,  # RTX 50
}


def capability(arch: int) -> tuple[int, int]:
    return divmod(arch, 10)


def arch_builds(arch: int) -> list[Build]:
    """What the engine may launch on sm_<arch>: High fidelity's kernels and the attention everywhere; realtime's
    W4A4 Triton kernels in the layout the arch gets (the fallback where NVRTC is missing, and realtime W4A4 where
    there are no INT4 tensor cores), the quantizer of the CUDA INT4 GEMM where that runs, and the FP8 kernels where
    there are FP8 tensor cores (W8A8 FP8 is realtime's choice there, or the user's), and the W8A8 int8 kernels
    everywhere (int8 tensor cores; the W4A4 recipe's option for down_proj)."""
    from kernels.fp8 import FP8_TENSOR_CORES
    from kernels.w4a4_cuda import NATIVE_INT4_ARCHS
    from kernels.w4a4_triton import layout_for

    builds = hifi_builds() + attention_builds() + w4a4_builds(layout_for(capability(arch))) + int8_builds()
    if arch in NATIVE_INT4_ARCHS:
        builds += w4a4_builds("packed")
    if capability(arch) >= FP8_TENSOR_CORES:
        builds += fp8_builds()
    return builds


@dataclass(frozen=True)
class Fit:
    """One build's resources on one arch, and whether it fits."""

    arch: int
    name: str
    shared: int  # bytes per block: Triton's dynamic shared memory plus the cubin's static
    limit: int
    registers: int
    spilled: int  # bytes of register spill stores per thread (ptxas); a stack frame of local arrays is not a spill

    @property
    def ok(self) -> bool:
        return self.shared <= self.limit and self.spilled == 0


def _field(usage: str, name: str) -> int:
    found = re.search(rf"\b{name}:(\d+)", usage)
    if found is None:
        raise ValueError(f"no {name} in cuobjdump's resource usage: {usage!r}")
    return int(found.group(1))


def fit(arch: int, build: Build, limit: int | None = None) -> Fit:
    """Compile `build` for sm_<arch> and measure it against `limit` (default: the arch's shared memory per block)."""
    compiled = compile_build(build, arch)
    usage = resource_usage(compiled.asm["cubin"])
    return Fit(arch, build.name, compiled.metadata.shared + _field(usage, "SHARED"),
               SHARED_MEMORY_PER_BLOCK[arch] if limit is None else limit, _field(usage, "REG"),
               spill_stores(compiled.asm["ptx"]))


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    archs = [int(a) for a in argv if a != "--json"] or list(SHARED_MEMORY_PER_BLOCK)
    fits = [fit(arch, build) for arch in archs for build in arch_builds(arch)]
    if as_json:
        print(json.dumps([{**asdict(f), "ok": f.ok} for f in fits]))
    else:
        for f in fits:
            print(f"sm_{f.arch:<4} {f.name:<32} shared {f.shared:>6} / {f.limit} B  reg {f.registers:>3}  "
                  f"spilled {f.spilled} B  {'ok' if f.ok else 'DOES NOT FIT'}")
    return 0 if all(f.ok for f in fits) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
