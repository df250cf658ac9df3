"""Compile the kernels a quality mode launches (High fidelity's, the realtime mode's Triton kernels, the W8A8 int8
ones alone), the ragged attention kernel or the Hopper GEMM candidates (tools/kernels/fused_gemm.py: sm_90 only) for
a GPU architecture without a GPU, and report what the compiler made of them: `python -m tools.kernels.aot
[hifi|realtime|int8|attention|gemm] [arch ...]` (default realtime, sm_90 and sm_89). `python -m
tools.kernels.aot_archs` checks every architecture's builds against its limits.

Uses Triton's own compiler and bundled ptxas, so it runs on any machine with Triton installed (not in
the interpreter: run it in a process without TRITON_INTERPRET). Specializations are those of a real
launch at the LM's shapes: 16-byte aligned pointers, sizes divisible by 16. Prints, per kernel, the
MMA instructions in the PTX and in the SASS, and the registers / spills (LOCAL) / shared memory of the cubin.
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


MODEL = {"hidden": 1024, "mlp": 3072, "q_heads": 16, "kv_heads": 8, "head_dim": 128, "books": 8, "classes": 1025}
CODEC_DTYPE = "fp32"  # the codec runs in float32 (engine.codec.AudioCodec.load's default)


def hifi_builds() -> list[Build]:
    """The kernels High fidelity launches besides the attention (`attention_builds`), at the model's sizes with
    the launch settings their wrappers compute from them: the input embedding, the norms, q/k norm + RoPE, SwiGLU,
    the unmasking loop's scoring and reveal, and the codec's Snake at both of its tiles."""
    from triton import next_power_of_2

    from kernels import _launch, cfg_score, embed, qk_norm_rope, reveal, rmsnorm, snake, swiglu

    hidden, mlp, books = MODEL["hidden"], MODEL["mlp"], MODEL["books"]
    norm = _signature("x_ptr:*fp16 x_row_scales_ptr:*fp16 x_col_scales_ptr:*fp16 residual_ptr:*fp16 weight_ptr:*fp16 "
                      "y_ptr:*fp16 residual_out_ptr:*fp16 inv_smooth_ptr:*fp16 codes_ptr:*fp16 scales_ptr:*fp16 "
                      "stride_x:i32 stride_x_row_scales:i32 stride_residual:i32 stride_y:i32 stride_residual_out:i32 "
                      "eps:fp32 N_COLS HAS_RESIDUAL X_SCALED QUANT BLOCK_N")
    norm_block = next_power_of_2(hidden)

    def norm_build(name: str, residual: bool) -> Build:
        constants = {"N_COLS": hidden, "HAS_RESIDUAL": residual, "X_SCALED": False, "QUANT": False,
                     "BLOCK_N": norm_block}
        return Build(name, rmsnorm._rmsnorm_kernel, norm, constants,
                     _launch.num_warps(norm_block), enable_fp_fusion=False)

    embedding = _signature("ids_ptr:*i64 audio_mask_ptr:*i1 audio_table_ptr:*fp16 text_table_ptr:*fp16 out_ptr:*fp16 "
                           "stride_ids_batch:i32 stride_ids_book:i32 stride_ids_row:i32 stride_mask_batch:i32 "
                           "stride_mask_row:i32 stride_audio_table:i32 stride_text_table:i32 stride_out_batch:i32 "
                           "stride_out_row:i32 n_classes:i32 hidden:i32 BOOKS BLOCK_H")
    embedding_block = min(next_power_of_2(hidden), embed._MAX_BLOCK)
    half, q_heads = MODEL["head_dim"] // 2, MODEL["q_heads"]
    rope = _signature("qkv_ptr:*fp16 q_ptr:*fp16 k_ptr:*fp16 q_weight_ptr:*fp16 k_weight_ptr:*fp16 cos_ptr:*fp16 "
                      "sin_ptr:*fp16 stride_qkv:i32 stride_q:i32 stride_q_head:i32 stride_k:i32 stride_k_head:i32 "
                      "stride_cos:i32 stride_sin:i32 n_positions:i32 eps:fp32 N_Q_HEADS N_KV_HEADS HALF "
                      "BLOCK_Q_HEADS BLOCK_KV_HEADS BLOCK_HALF")
    rope_constants = {"N_Q_HEADS": q_heads, "N_KV_HEADS": MODEL["kv_heads"], "HALF": half,
                      "BLOCK_Q_HEADS": next_power_of_2(q_heads), "BLOCK_KV_HEADS": next_power_of_2(MODEL["kv_heads"]),
                      "BLOCK_HALF": next_power_of_2(half)}
    rope_warps = _launch.num_warps(2 * next_power_of_2(q_heads) * next_power_of_2(half))
    glu_block = swiglu._block(mlp)
    glu = _signature("gate_up_ptr:*fp16 out_ptr:*fp16 stride_gate_up:i32 stride_out:i32 n_cols:i32 BLOCK")
    classes = next_power_of_2(MODEL["classes"])
    score = _signature("cond_ptr:*fp16 uncond_ptr:*fp16 token_ptr:*i64 score_ptr:*fp32 stride_cond_book:i32 "
                       "stride_cond_frame:i32 stride_uncond_book:i32 stride_uncond_frame:i32 stride_token_book:i32 "
                       "stride_token_frame:i32 stride_score_book:i32 stride_score_frame:i32 "
                       "guidance_scale:fp32 layer_penalty:fp32 mask_id:i32 N_CLASSES HAS_GUIDANCE BLOCK_V")
    noisy = _signature("score_ptr:*fp32 token_ptr:*i64 valid_ptr:*i1 key_ptr:*i64 frame_ptr:*i64 step_ptr:*i64 "
                       "noisy_ptr:*fp32 H:i32 n_books:i32 max_frames:i32 temperature:fp32 mask_id:i32 HAS_NOISE BLOCK")
    reveal_sig = _signature("noisy_ptr:*fp32 predicted_ptr:*i64 token_ptr:*i64 ids_ptr:*i64 cond_col_ptr:*i64 "
                            "uncond_col_ptr:*i64 sequence_slots_ptr:*i64 schedule_ptr:*i64 step_ptr:*i64 H:i32 "
                            "n_books:i32 stride_ids_book:i32 stride_schedule:i32 BOOKS BLOCK_T")
    snake_sig = _signature(f"x_ptr:*{CODEC_DTYPE} alpha_ptr:*{CODEC_DTYPE} bias_ptr:*{CODEC_DTYPE} "
                           f"residual_ptr:*{CODEC_DTYPE} y_ptr:*{CODEC_DTYPE} h_ptr:*{CODEC_DTYPE} n_rows:i32 "
                           "n_channels:i32 length:i32 HAS_BIAS HAS_RESIDUAL STORE_INPUT ROWS BLOCK")

    def snake_build(length: int, fused: bool) -> Build:
        block = snake._tile(length)
        rows = snake._BLOCK // block
        constants = {"HAS_BIAS": fused, "HAS_RESIDUAL": fused, "STORE_INPUT": fused, "ROWS": rows, "BLOCK": block}
        return Build(f"snake {rows}x{block}{' + bias, residual' if fused else ''}", snake._snake_kernel, snake_sig,
                     constants, _launch.num_warps(rows * block), enable_fp_fusion=False)

    return [
        Build("embed", embed._embed_kernel, embedding, {"BOOKS": books, "BLOCK_H": embedding_block},
              _launch.num_warps(embedding_block)),
        norm_build("rmsnorm", residual=False),
        norm_build("add_rmsnorm", residual=True),
        Build("qk_norm_rope", qk_norm_rope._qk_norm_rope_kernel, rope, rope_constants, rope_warps,
              enable_fp_fusion=False),
        Build("swiglu", swiglu._swiglu_kernel, glu, {"BLOCK": glu_block}, _launch.num_warps(glu_block),
              enable_fp_fusion=False),
        Build("cfg_score", cfg_score._cfg_score_kernel, score, {"N_CLASSES": MODEL["classes"], "HAS_GUIDANCE": True,
                                                              "BLOCK_V": classes},
              _launch.num_warps(classes), enable_fp_fusion=False),
        Build("noisy_scores", reveal._noisy_scores_kernel, noisy, {"HAS_NOISE": True, "BLOCK": reveal._BLOCK},
              num_warps=2, enable_fp_fusion=False),
        Build("reveal", reveal._reveal_kernel, reveal_sig, {"BOOKS": next_power_of_2(books),
                                                            "BLOCK_T": reveal._BLOCK_T}, num_warps=8),
        snake_build(length=4096, fused=True),
        snake_build(length=4096, fused=False),
        snake_build(length=100, fused=True),
    ]


def w4a4_builds(layout: str) -> list[Build]:
    """Realtime's W4A4 Triton kernels with codes in `layout` ("int8" or "e4m3", `kernels.w4a4_triton.mma_layout`;
    "packed": the quantizer alone, feeding the CUDA INT4 GEMM), with the constants and options the wrappers use."""
    from kernels import w4a4_triton as w4

    codes = {"int8": "*i8", "packed": "*i8", "e4m3": "*fp8e4nv"}[layout]
    quantize = _signature(f"x_ptr:*fp16 smooth_ptr:*fp32 down_ptr:*fp16 codes_ptr:{codes} scales_ptr:*fp32 "
                          "lowrank_ptr:*fp32 M:i32 K:i32 stride_xm:i32 RANK PACK BLOCK_M GROUPS DOWN_BLOCK_K")
    gemm = _signature(f"a_ptr:{codes} sa_ptr:*fp32 w_ptr:{codes} sw_ptr:*fp32 lowrank_ptr:*fp32 up_ptr:*fp16 "
                      "bias_ptr:*fp16 residual_ptr:*fp16 out_ptr:*fp16 sums_ptr:*fp32 M:i32 N:i32 K:i32 "
                      "RANK INT8 HAS_BIAS HAS_RESIDUAL WRITE_SUMS BLOCK_M BLOCK_N GROUP_M")

    def gemm_build(tile: str) -> Build:
        opts = w4.GEMM_TILES[tile]
        constants = {"RANK": 32, "INT8": layout == "int8", "HAS_BIAS": False, "HAS_RESIDUAL": False,
                     "WRITE_SUMS": False, "BLOCK_M": opts["BLOCK_M"], "BLOCK_N": opts["BLOCK_N"], "GROUP_M": 8}
        return Build(f"w4a4 gemm {layout} {tile}", w4._w4a4_gemm_kernel, gemm, constants,
                     opts["num_warps"], opts["num_stages"])

    quantize_constants = {"RANK": 32, "PACK": layout == "packed", "BLOCK_M": w4.QUANT_ROWS,
                          "GROUPS": w4.QUANT_GROUPS, "DOWN_BLOCK_K": w4.DOWN_BLOCK_K}
    builds = [Build(f"w4a4 quantize {layout}", w4._quantize_act_kernel, quantize, quantize_constants, num_warps=4,
                    enable_fp_fusion=False)]
    if layout != "packed":
        builds += [gemm_build(tile) for tile in ("128x128", "64x128")]
    return builds


def fp8_builds() -> list[Build]:
    """Realtime's W8A8 FP8 kernels (GPUs with FP8 tensor cores): the activation quantizer at K = 1024 and 3072,
    the norms that quantize their output, and SwiGLU applying the FP8 gate_up product's scales."""
    import torch
    from triton import next_power_of_2

    from kernels import _launch, fp8, rmsnorm, swiglu

    hidden, mlp = MODEL["hidden"], MODEL["mlp"]
    quantize = _signature("x_ptr:*fp16 inv_smooth_ptr:*fp32 codes_ptr:*fp8e4nv scales_ptr:*fp32 K:i32 stride_xm:i32 "
                          "BLOCK_K")
    def norm(x: str, scales: str) -> dict:
        return _signature(f"x_ptr:*{x} x_row_scales_ptr:*{scales} x_col_scales_ptr:*{scales} residual_ptr:*fp16 "
                          "weight_ptr:*fp16 y_ptr:*fp16 residual_out_ptr:*fp16 inv_smooth_ptr:*fp32 codes_ptr:*fp8e4nv "
                          "scales_ptr:*fp32 stride_x:i32 stride_x_row_scales:i32 stride_residual:i32 stride_y:i32 "
                          "stride_residual_out:i32 eps:fp32 N_COLS HAS_RESIDUAL X_SCALED QUANT BLOCK_N")
    glu = _signature("raw_ptr:*bf16 row_scales_ptr:*fp32 col_scales_ptr:*fp32 out_ptr:*fp16 stride_raw:i32 "
                     "stride_out:i32 n_cols:i32 BLOCK")
    glu_fp8 = _signature("raw_ptr:*bf16 row_scales_ptr:*fp32 col_scales_ptr:*fp32 inv_smooth_ptr:*fp32 "
                         "codes_ptr:*fp8e4nv scales_ptr:*fp32 stride_raw:i32 n_cols:i32 DTYPE SLICE")

    def quantize_build(k: int) -> Build:
        block = next_power_of_2(k)
        return Build(f"fp8 quantize K={k}", fp8._quantize_fp8_kernel, quantize, {"BLOCK_K": block},
                     _launch.num_warps(block), enable_fp_fusion=False)

    def norm_build(name: str, residual: bool, product: bool = False) -> Build:
        block = next_power_of_2(hidden)
        signature = norm("bf16", "fp32") if product else norm("fp16", "fp16")
        return Build(name, rmsnorm._rmsnorm_kernel, signature, {"N_COLS": hidden, "HAS_RESIDUAL": residual,
                                                                "X_SCALED": product, "QUANT": True, "BLOCK_N": block},
                     _launch.num_warps(block), enable_fp_fusion=False)

    glu_block = swiglu._block(mlp)
    return [quantize_build(hidden), quantize_build(mlp), norm_build("rmsnorm_fp8", residual=False),
            norm_build("add_rmsnorm_fp8", residual=True),
            norm_build("add_rmsnorm_fp8 of an FP8 product", residual=True, product=True),
            Build("swiglu_scaled", swiglu._swiglu_scaled_kernel, glu, {"BLOCK": glu_block},
                  _launch.num_warps(glu_block), enable_fp_fusion=False),
            Build("swiglu_scaled_fp8", swiglu._swiglu_scaled_fp8_kernel, glu_fp8,
                  {"DTYPE": swiglu._TRITON_DTYPES[torch.float16], "SLICE": swiglu._slice(mlp)},
                  swiglu.SWIGLU_FP8_WARPS, enable_fp_fusion=False)]


def int8_builds() -> list[Build]:
    """The W8A8 int8 kernels (int8 tensor cores, any sm_80+ GPU; realtime's W4A4 recipe option for down_proj): the
    standalone activation quantizer and the SwiGLU that quantizes, at K = 3072, and the GEMM at each of its tiles."""
    from triton import next_power_of_2

    from kernels import _launch, int8, swiglu

    mlp = MODEL["mlp"]
    quantize = _signature("x_ptr:*fp16 smooth_ptr:*fp32 codes_ptr:*i8 scales_ptr:*fp32 K:i32 stride_xm:i32 BLOCK_K")
    glu = _signature("gate_up_ptr:*fp16 smooth_ptr:*fp32 codes_ptr:*i8 scales_ptr:*fp32 stride_gate_up:i32 "
                     "n_cols:i32 SLICE")
    gemm = _signature("a_ptr:*i8 sa_ptr:*fp32 w_ptr:*i8 sw_ptr:*fp32 bias_ptr:*fp16 out_ptr:*fp16 M:i32 N:i32 K:i32 "
                      "HAS_BIAS EVEN_K BLOCK_M BLOCK_N BLOCK_K GROUP_M")

    def gemm_build(tile: str) -> Build:  # down_proj: K = 3072, a multiple of every tile's BLOCK_K
        opts = dict(int8.GEMM_TILES[tile])
        warps, stages = opts.pop("num_warps"), opts.pop("num_stages")
        return Build(f"int8 gemm {tile}", int8._int8_gemm_kernel, gemm,
                     {"HAS_BIAS": False, "EVEN_K": True, "GROUP_M": 8, **opts}, warps, stages, enable_fp_fusion=False)

    block = next_power_of_2(mlp)
    return [Build(f"int8 quantize K={mlp}", int8._quantize_int8_kernel, quantize, {"BLOCK_K": block},
                  _launch.num_warps(block), enable_fp_fusion=False),
            Build("swiglu_int8", swiglu._swiglu_int8_kernel, glu, {"SLICE": swiglu._slice(mlp)},
                  swiglu.SWIGLU_INT8_WARPS, enable_fp_fusion=False),
            *(gemm_build(tile) for tile in int8.GEMM_TILES if tile != "interpreter")]


def realtime_builds() -> list[Build]:
    """The kernels realtime mode may launch: W4A4 in both MMA layouts, the W8A8 FP8 and the W8A8 int8 kernels."""
    return w4a4_builds("e4m3") + w4a4_builds("int8") + fp8_builds() + int8_builds()


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


GROUPS = {"hifi": hifi_builds, "realtime": realtime_builds, "int8": int8_builds, "attention": attention_builds,
          "gemm": fused_gemm_builds}


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


def _cuobjdump(cubin: bytes, flag: str) -> subprocess.CompletedProcess:
    """Triton's bundled cuobjdump run with `flag` on the kernel's cubin."""
    import triton

    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(cuobjdump), flag, str(path)], capture_output=True, text=True, check=False)


def resource_usage(cubin: bytes) -> str:
    """Registers, spill (LOCAL) and shared memory of the kernel, from Triton's bundled cuobjdump."""
    run = _cuobjdump(cubin, "--dump-resource-usage")
    usage = re.search(r"REG:\d+.*", run.stdout)
    return usage.group(0).strip() if usage else (run.stderr.strip() or run.stdout.strip())[-200:]


def spill_stores(ptx: str) -> int:
    """Bytes of register spill stores per thread, as ptxas reports them compiling `ptx` for its own target (with
    the ptxas Triton chose for that arch). cuobjdump's STACK also counts local arrays the code declares, such as the
    one libdevice's sinf keeps for the slow path of its argument reduction (Triton 3.6's snake kernels: a 32 B stack
    frame, no spill)."""
    from triton.backends.nvidia.compiler import get_ptxas

    target = re.search(r"^\.target\s+(sm_(\d+)\w*)", ptx, re.MULTILINE)
    if target is None:
        raise ValueError("no .target line in the PTX")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(ptx)
        run = subprocess.run([get_ptxas(int(target.group(2))).path, "-v", "--gpu-name", target.group(1), str(path),
                              "-o", str(path) + ".cubin"], capture_output=True, text=True, check=False)
    return parse_spill_stores(run.stderr + run.stdout)


def parse_spill_stores(ptxas_verbose: str) -> int:
    """The largest "N bytes spill stores" of `ptxas -v`'s report (one line per function); ValueError if none."""
    found = [int(n) for n in re.findall(r"(\d+) bytes spill stores", ptxas_verbose)]
    if not found:
        raise ValueError(f"no spill figures in ptxas's report: {ptxas_verbose[-300:]!r}")
    return max(found)


def sass_mma_summary(cubin: bytes) -> dict[str, int]:
    """Counts of the tensor-core instructions in the SASS (what the GPU runs: IMMA, HMMA, QMMA; IGMMA, HGMMA,
    QGMMA on Hopper), by opcode with its shape and types."""
    found: dict[str, int] = {}
    for op in re.findall(r"\b([A-Z]?G?MMA\.[0-9A-Zx.]+)", _cuobjdump(cubin, "-sass").stdout):
        found[op] = found.get(op, 0) + 1
    return found


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
            print(f"{'':<24} sass: {sass_mma_summary(compiled.asm['cubin']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
