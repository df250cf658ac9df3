"""Compile the realtime-mode Triton kernels, the ragged attention kernel or the Hopper GEMM candidates
(tools/kernels/fused_gemm.py: sm_90 only) for a GPU architecture without a GPU, and report what the
compiler made of them: `python -m tools.kernels.aot [realtime|attention|gemm] [arch ...]` (default
realtime, sm_90 and sm_89).

Uses Triton's own compiler and bundled ptxas, so it runs on any machine with Triton installed (not in
the interpreter: run it in a process without TRITON_INTERPRET). Specializations are those of a real
launch at the LM's shapes: 16-byte aligned pointers, sizes divisible by 16. Prints, per kernel, the
MMA instructions in the PTX and the registers / spills (LOCAL) / shared memory of the cubin.
"""
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Build:
    name: str
    kernel: object  # a @triton.jit function
    signature: dict  # argument name -> Triton type, "constexpr" for compile-time constants
    constexprs: dict
    num_warps: int
    num_stages: int = 3
    enable_fp_fusion: bool = True


def _signature(spec: str) -> dict[str, str]:
    """"name:type ..." -> {name: type}, in argument order; a bare name is a compile-time constant."""
    return {name: kind or "constexpr" for name, _, kind in (item.partition(":") for item in spec.split())}


def realtime_builds() -> list[Build]:
    """The kernels realtime mode launches, with the constants and options the wrappers use."""
    from kernels import fp8
    from kernels import w4a4_triton as w4

    quantize = _signature("x_ptr:*fp16 smooth_ptr:*fp32 down_ptr:*fp16 codes_ptr:*fp8e4nv scales_ptr:*fp32 "
                          "lowrank_ptr:*fp32 M:i32 K:i32 stride_xm:i32 RANK PACK BLOCK_M GROUPS DOWN_BLOCK_K")
    gemm = _signature("a_ptr:*fp8e4nv sa_ptr:*fp32 w_ptr:*fp8e4nv sw_ptr:*fp32 lowrank_ptr:*fp32 up_ptr:*fp16 "
                      "bias_ptr:*fp16 residual_ptr:*fp16 out_ptr:*fp16 sums_ptr:*fp32 M:i32 N:i32 K:i32 "
                      "RANK INT8 HAS_BIAS HAS_RESIDUAL WRITE_SUMS BLOCK_M BLOCK_N GROUP_M")
    fp8_quantize = _signature("x_ptr:*fp16 smooth_ptr:*fp32 codes_ptr:*fp8e4nv scales_ptr:*fp32 K:i32 stride_xm:i32 "
                              "BLOCK_K")

    def gemm_build(layout: str, tile: str) -> Build:
        opts = w4.GEMM_TILES[tile]
        constants = {"RANK": 32, "INT8": layout == "int8", "HAS_BIAS": False, "HAS_RESIDUAL": False,
                     "WRITE_SUMS": False, "BLOCK_M": opts["BLOCK_M"], "BLOCK_N": opts["BLOCK_N"], "GROUP_M": 8}
        signature = {**gemm, "a_ptr": "*i8", "w_ptr": "*i8"} if layout == "int8" else gemm
        return Build(f"w4a4 gemm {layout} {tile}", w4._w4a4_gemm_kernel, signature, constants,
                     opts["num_warps"], opts["num_stages"])

    quantize_constants = {"RANK": 32, "PACK": False, "BLOCK_M": w4.QUANT_ROWS, "GROUPS": w4.QUANT_GROUPS,
                          "DOWN_BLOCK_K": w4.DOWN_BLOCK_K}
    return [
        Build("w4a4 quantize e4m3", w4._quantize_act_kernel, quantize, quantize_constants, num_warps=4,
              enable_fp_fusion=False),
        gemm_build("e4m3", "128x128"),
        gemm_build("e4m3", "64x128"),
        gemm_build("int8", "128x128"),
        Build("fp8 quantize K<=4096", fp8._quantize_fp8_kernel, fp8_quantize, {"BLOCK_K": 4096}, num_warps=16,
              enable_fp_fusion=False),
    ]


def wrapper_defaults(wrapper) -> dict:
    """The keyword defaults of a kernel's Python wrapper (its tiles and launch settings), by parameter name."""
    import inspect

    return {k: p.default for k, p in inspect.signature(wrapper).parameters.items()
            if p.default is not inspect.Parameter.empty}


def attention_builds() -> list[Build]:
    """The ragged attention kernel HiFi and realtime launch, at the model's head shapes (16 query
    heads over 8 KV heads of 128) with the wrapper's default tiles."""
    from kernels import ragged_attention as ra

    defaults = wrapper_defaults(ra.ragged_attention)
    signature = _signature("q_ptr:*fp16 k_ptr:*fp16 v_ptr:*fp16 o_ptr:*fp16 start_ptr:*i32 end_ptr:*i32 "
                           "stride_qs:i32 stride_qh:i32 stride_ks:i32 stride_kh:i32 stride_vs:i32 stride_vh:i32 "
                           "stride_os:i32 stride_oh:i32 n_rows:i32 qk_scale:fp32 "
                           "GROUPS HEADS IEEE HEAD_DIM BLOCK_M BLOCK_N MASK_ALL")
    constants = {"GROUPS": 2, "HEADS": 2 if defaults["group_heads"] else 1, "IEEE": False, "HEAD_DIM": 128,
                 "BLOCK_M": defaults["block_m"], "BLOCK_N": defaults["block_n"], "MASK_ALL": defaults["mask_all"]}
    return [Build("ragged attention fp16", ra._ragged_attention_kernel, signature, constants,
                  defaults["num_warps"], defaults["num_stages"])]


def fused_gemm_builds() -> list[Build]:
    """The Hopper GEMMs of tools.kernels.fused_gemm with each epilogue, at the default tiles (sm_90 only: TMA)."""
    from tools.kernels import fused_gemm as fg

    def build(name: str, epilogue: int) -> Build:
        bm, bh, bk, warps, stages, _, ws = fg.DEFAULT_TILES[epilogue]
        signature = _signature(
            f"a_desc:tensordesc<fp16[{bm},{bk}]> w_desc:tensordesc<fp16[{bh},{bk}]> out_ptr:*fp16 stride_out:i32 "
            "q_weight_ptr:*fp16 k_weight_ptr:*fp16 cos_ptr:*fp16 sin_ptr:*fp16 stride_cos:i32 stride_sin:i32 "
            "n_positions:i32 eps:fp32 M:i32 K:i32 n_tiles_n:i32 up_row:i32 "
            "N_Q_HEADS N_KV_HEADS EPILOGUE BM BH BK GROUP_M WARP_SPECIALIZE")
        constants = {"N_Q_HEADS": 16, "N_KV_HEADS": 8, "EPILOGUE": epilogue, "BM": bm, "BH": bh, "BK": bk,
                     "GROUP_M": 8, "WARP_SPECIALIZE": ws}
        return Build(name, fg._fused_gemm_kernel, signature, constants, warps, stages, enable_fp_fusion=False)

    return [build("gemm plain", fg.PLAIN), build("gemm + swiglu", fg.SWIGLU),
            build("gemm + qk norm rope", fg.QK_NORM_ROPE)]


GROUPS = {"realtime": realtime_builds, "attention": attention_builds, "gemm": fused_gemm_builds}


def compile_build(build: Build, arch: int):
    """The CompiledKernel of `build` for sm_<arch> (asm keys: ttir, ttgir, llir, ptx, cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(build.signature)
    aligned = {(names.index(n),): [["tt.divisibility", 16]] for n, t in build.signature.items()
               if t.startswith("*") or (t == "i32" and n != "M")}
    src = ASTSource(fn=build.kernel, signature=build.signature, constexprs=build.constexprs, attrs=aligned)
    options = {"num_warps": build.num_warps, "num_stages": build.num_stages, "enable_fp_fusion": build.enable_fp_fusion}
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)


def resource_usage(cubin: bytes) -> str:
    """Registers, spill (LOCAL) and shared memory of the kernel, from Triton's bundled cuobjdump."""
    import triton

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        run = subprocess.run([str(cuobjdump), "--dump-resource-usage", str(path)], capture_output=True, text=True,
                             check=False)
    usage = re.search(r"REG:\d+.*", run.stdout)
    return usage.group(0).strip() if usage else (run.stderr.strip() or run.stdout.strip())[-200:]


def mma_summary(ptx: str) -> dict[str, int]:
    """Counts of the tensor-core instructions in the PTX, by opcode and shape/type suffix."""
    found: dict[str, int] = {}
    for op in re.findall(r"\b(wgmma\.mma_async\S*|mma\.sync\S*)", ptx):
        found[op] = found.get(op, 0) + 1
    return found


def main(argv: list[str]) -> int:
    group = argv.pop(0) if argv and argv[0] in GROUPS else "realtime"
    archs = [int(a) for a in argv] or [90, 89]
    for arch in archs:
        print(f"== sm_{arch}")
        for build in GROUPS[group]():
            compiled = compile_build(build, arch)
            ptx = compiled.asm["ptx"]
            usage = resource_usage(compiled.asm["cubin"])
            print(f"{build.name:<24} dynamic smem {compiled.metadata.shared} B, {usage}")
            print(f"{'':<24} mma: {mma_summary(ptx) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
