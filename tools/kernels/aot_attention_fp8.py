"""Compile the FP8 attention prototype (tools/kernels/attention_fp8.py) for sm_90 without a GPU and report its
tensor-core instructions (PTX and SASS), registers, spills and how its operands reach shared memory:
`python -m tools.kernels.aot_attention_fp8 [arch ...]` (default 90; run it without TRITON_INTERPRET). As
`python -m tools.kernels.aot attention` does for main's fp16 kernel: the wrapper's defaults, the model's heads
(16 query heads over 8 KV heads of 128)."""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.kernels.aot import Build, _signature, compile_build, mma_summary, resource_usage, wrapper_defaults

# SASS opcodes that say how the kernel moves its operands: QGMMA (FP8 wgmma), LDGSTS (pipelined global -> shared
# copies), STS.U8 (byte-wise shared stores: an operand staged through registers), STL (register spills)
SASS_OPCODES = ("QGMMA", "HGMMA", "LDGSTS", "STS.U8", "STL")


def fp8_attention_build() -> Build:
    from tools.kernels import attention_fp8 as a8

    defaults = wrapper_defaults(a8.ragged_attention_fp8)
    signature = _signature("q_ptr:*fp8e4nv sq_ptr:*fp32 k_ptr:*fp8e4nv sk_ptr:*fp32 vt_ptr:*fp8e4nv sv_ptr:*fp32 "
                           "o_ptr:*fp16 start_ptr:*i32 end_ptr:*i32 stride_qs:i32 stride_qh:i32 stride_sqs:i32 "
                           "stride_ks:i32 stride_kh:i32 stride_sks:i32 stride_vth:i32 stride_vtd:i32 stride_os:i32 "
                           "stride_oh:i32 n_rows:i32 qk_scale:fp32 P_SHIFT KEY_PAD GROUPS HEAD_DIM BLOCK_M BLOCK_N")
    constants = {"P_SHIFT": a8.P_SHIFT, "KEY_PAD": a8.KEY_PAD, "GROUPS": 2, "HEAD_DIM": 128,
                 "BLOCK_M": defaults["block_m"], "BLOCK_N": defaults["block_n"]}
    return Build("ragged attention e4m3", a8._ragged_attention_fp8_kernel, signature, constants,
                 defaults["num_warps"], defaults["num_stages"])


def sass_counts(cubin: bytes) -> dict[str, int]:
    """How often each of SASS_OPCODES occurs in the cubin's SASS (Triton's bundled cuobjdump)."""
    import triton

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run([str(cuobjdump), "-sass", str(path)], capture_output=True, text=True, check=False).stdout
    return {op: len(re.findall(rf"\b{re.escape(op)}\b", sass)) for op in SASS_OPCODES}


def main(argv: list[str]) -> int:
    for arch in [int(a) for a in argv] or [90]:
        build = fp8_attention_build()
        compiled = compile_build(build, arch)
        print(f"== sm_{arch} {build.name}: dynamic smem {compiled.metadata.shared} B, "
              f"{resource_usage(compiled.asm['cubin'])}")
        print(f"mma: {mma_summary(compiled.asm['ptx']) or 'none'}")
        print(f"sass: {sass_counts(compiled.asm['cubin'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
