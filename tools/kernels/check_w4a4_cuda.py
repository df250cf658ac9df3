"""Check the W4A4 kernels on a GPU: `python -m tools.kernels.check_w4a4_cuda [--quick] [--no-bench]`.

1. Builds the CUDA INT4 GEMM for this GPU with NVRTC and checks it, and the Triton int8 path, against
   `kernels/w4a4_ref.py` at the LM's shapes: integer group sums exactly, outputs within fp16 rounding.
   On sm_90 the INT4 MMA is emulated by the compiler: slow, still exact, so correctness checks hold.
2. Builds it for sm_89 and counts `IMMA.16864.S4.S4` in the SASS (`cuobjdump --dump-sass`; from the
   CUDA toolkit or `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`).
3. Times cuBLAS fp16, the Triton int8 path and the CUDA INT4 path with `triton.testing.do_bench`.
Exits non-zero when a check fails.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from kernels import w4a4_cuda
from kernels.numerics import fp16_rounding_ratio
from kernels.w4a4_ref import (
    group_sums_ref,
    pack_int4,
    quantize_act_lowrank_ref,
    quantize_groups_ref,
    unpack_int4,
    w4a4_linear_ref,
)

SHAPES = [("qkv_proj", 1024, 4096), ("o_proj", 2048, 1024), ("gate_up_proj", 1024, 6144), ("down_proj", 3072, 1024)]
LAYERS = 28  # each shape runs once per layer in a forward
SUM_ROWS = 512  # rows whose group sums are compared (all of them would need GBs at M = 2048)


def make_layer(k: int, n: int, rank: int = 32, seed: int = 0) -> SimpleNamespace:
    g = torch.Generator(device="cuda").manual_seed(seed)
    codes, scales = quantize_groups_ref(0.05 * torch.randn(n, k, device="cuda", generator=g))
    return SimpleNamespace(
        smooth=0.5 + torch.rand(k, device="cuda", generator=g), qweight=pack_int4(codes), wscales=scales,
        lora_down=(0.2 * torch.randn(k, rank, device="cuda", generator=g)).half(),
        lora_up=(0.2 * torch.randn(n, rank, device="cuda", generator=g)).half(),
        bias=(0.5 * torch.randn(n, device="cuda", generator=g)).half())


def make_input(m: int, k: int, seed: int) -> torch.Tensor:
    x = torch.randn(m, k, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed))
    x[:, 7] *= 30  # an outlier channel
    return x.half()


def check_correctness(ms: list[int]) -> bool:
    from kernels.w4a4_triton import (
        mma_layout,
        quantize_act,
        w4a4_gemm_debug,
        weight_codes,
    )

    layout = mma_layout(torch.device("cuda"))
    print(f"\n1. correctness on sm_{w4a4_cuda.arch_of(torch.device('cuda'))} "
          f"(sums: exact over the first {SUM_ROWS} rows; ratio <= 1: within fp16 rounding)")
    print(f"{'layer':<13}{'M':>6} {'quantizer':>10} {'cuda sums':>10} {'cuda ratio':>11} "
          f"{'triton sums':>12} {'triton ratio':>13}")
    ok = True
    for name, k, n in SHAPES:
        layer = make_layer(k, n)
        for m in ms:
            x = make_input(m, k, seed=m)
            act = quantize_act(x, layer.smooth, layer.lora_down, layout="packed")
            want = quantize_act_lowrank_ref(x, layer.smooth, layer.lora_down)
            codes_ok = torch.equal(act.codes, want.codes) and torch.equal(act.scales, want.scales)
            ref32, ref16 = w4a4_linear_ref(x.float(), layer), w4a4_linear_ref(x, layer)
            rows = slice(0, min(m, SUM_ROWS))
            sums_ref = group_sums_ref(unpack_int4(act.codes[rows]), unpack_int4(layer.qweight))
            cuda_sums, cuda_ratio = True, 0.0
            for tile in (w4a4_cuda.LARGE, w4a4_cuda.SMALL):
                y, sums = w4a4_cuda.w4a4_gemm_cuda_debug(act, layer.qweight, layer.wscales, layer.lora_up,
                                                         layer.bias, tile=tile)
                cuda_sums &= torch.equal(sums[rows], sums_ref)
                cuda_ratio = max(cuda_ratio, fp16_rounding_ratio(y, ref32, ref16))
                del sums
            mma_act = quantize_act(x, layer.smooth, layer.lora_down, layout=layout)
            y, sums = w4a4_gemm_debug(mma_act, weight_codes(layer.qweight, layout), layer.wscales, layer.lora_up,
                                      layer.bias)
            triton_sums = torch.equal(sums[rows], sums_ref)
            triton_ratio = fp16_rounding_ratio(y, ref32, ref16)
            del sums
            row_ok = codes_ok and cuda_sums and triton_sums and cuda_ratio <= 1 and triton_ratio <= 1
            ok &= row_ok
            print(f"{name:<13}{m:>6} {codes_ok!s:>10} {cuda_sums!s:>10} {cuda_ratio:>11.3f} "
                  f"{triton_sums!s:>12} {triton_ratio:>13.3f}{'' if row_ok else '   <-- FAIL'}", flush=True)
    return ok


def find_cuobjdump() -> str | None:
    candidates = [shutil.which("cuobjdump")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "cuobjdump"))
    for root in sys.path:
        candidates += glob.glob(os.path.join(root, "nvidia", "**", "bin", "cuobjdump"), recursive=True)
    return next((c for c in candidates if c and os.path.isfile(c)), None)


def check_sass() -> bool:
    print("\n2. SASS of the sm_89 cubin")
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("   cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (or a CUDA toolkit)")
        return True
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w4a4_gemm_sm89.cubin")
        with open(path, "wb") as f:
            f.write(w4a4_cuda.compile_cubin(89))
        env = dict(os.environ, PATH=os.path.dirname(cuobjdump) + os.pathsep + os.environ.get("PATH", ""))
        sass = subprocess.run([cuobjdump, "--dump-sass", path], capture_output=True, text=True, env=env,
                              check=True).stdout
    counts = {op: sass.count(op) for op in ("IMMA.16864.S4.S4", "HMMA.16816.F32", "LDSM", "LDGSTS", "CALL")}
    print("   " + ", ".join(f"{op}: {c}" for op, c in counts.items()))
    if counts["IMMA.16864.S4.S4"] == 0:
        print("   FAIL: no native INT4 MMA in the sm_89 SASS")
    return counts["IMMA.16864.S4.S4"] > 0


def bench(ms: list[int]) -> None:
    from triton.testing import do_bench

    from kernels.w4a4_triton import mma_layout, quantize_act, w4a4_gemm, weight_codes

    native = w4a4_cuda.arch_of(torch.device("cuda")) in w4a4_cuda.NATIVE_INT4_ARCHS
    print(f"\n3. time per call, us (do_bench median){'' if native else '; CUDA INT4 MMA is EMULATED on this GPU'}")
    print(f"{'layer':<13}{'M':>6} {'fp16 cuBLAS':>12} {'quantize':>9} {'triton gemm':>12} {'cuda gemm':>10} "
          f"{'triton all':>11} {'cuda all':>9}")
    totals: dict[int, list[float]] = {}
    layout = mma_layout(torch.device("cuda"))
    for name, k, n in SHAPES:
        layer = make_layer(k, n)
        w16 = torch.randn(n, k, device="cuda", dtype=torch.float16)
        codes = weight_codes(layer.qweight, layout)
        for m in ms:
            x = make_input(m, k, seed=m)
            act = quantize_act(x, layer.smooth, layer.lora_down, layout="packed")
            mma_act = quantize_act(x, layer.smooth, layer.lora_down, layout=layout)
            out = torch.empty(m, n, device="cuda", dtype=torch.float16)
            tail = (layer.wscales, layer.lora_up, layer.bias)
            times = [
                do_bench(lambda: F.linear(x, w16)),
                do_bench(lambda: quantize_act(x, layer.smooth, layer.lora_down, layout="packed")),
                do_bench(lambda: w4a4_gemm(mma_act, codes, *tail, out=out)),
                do_bench(lambda: w4a4_cuda.w4a4_gemm_cuda(act, layer.qweight, *tail, out=out)),
            ]
            times += [times[1] + times[2], times[1] + times[3]]
            totals.setdefault(m, [0.0] * len(times))
            totals[m] = [t + LAYERS * v for t, v in zip(totals[m], times)]
            print(f"{name:<13}{m:>6} " + " ".join(f"{1000 * t:>{w}.1f}" for t, w in zip(times, (12, 9, 12, 10, 11, 9))),
                  flush=True)
    print(f"\nper forward ({LAYERS} layers x 4 linears), ms:")
    for m, t in totals.items():
        print(f"{'all':<13}{m:>6} " + " ".join(f"{v:>{w}.2f}" for v, w in zip(t, (12, 9, 12, 10, 11, 9))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="M in (1, 17, 256) only")
    parser.add_argument("--no-bench", action="store_true", help="skip the timings")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    ms = [1, 17, 256] if args.quick else [1, 17, 256, 1024, 2048]
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, sm_{props.major}{props.minor}, {props.multi_processor_count} SMs; torch {torch.__version__} "
          f"(CUDA {torch.version.cuda}); NVRTC {'.'.join(map(str, w4a4_cuda.nvrtc().version))}")
    ok = check_correctness(ms)
    ok &= check_sass()
    if not args.no_bench:
        bench(ms)
    print("\nALL CHECKS PASSED" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
