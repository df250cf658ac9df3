"""Build FlashAttention-3's variable-length forward for our layout into one shared library with a plain C ABI:

    python -m tools.kernels.fa3_probe.build --fa3 DIR [--cutlass DIR] [--nvcc PATH] [--out DIR] [--configs NAME...]

FA3's source is not in this repository (Dao-AILab/flash-attention, BSD-3; written against its snapshot of
2026-08-15, commit 0251105a): DIR is its hopper/ folder or the checkout holding it (--fa3, else $VOICEDESK_FA3).
CUTLASS's headers and nvcc are found as tools.kernels.cutlass_gemm.build finds them (nvidia-cutlass 4.2.0.0's
headers; FA3 pins its own CUTLASS submodule, 4.2.0 compiles it). The CUDA runtime is linked statically.
Per configuration two objects, kernel.cu (FA3's kernel: about 70 s on one core of the CPU machine) and entry.cu
(the C ABI: seconds), and FA3's flash_prepare_scheduler.cu once; an object built by the same command after its
source last changed is reused.
"""
import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.kernels.cutlass_gemm.build import ARCH, BuildError, _run, find_headers, find_nvcc
from tools.kernels.fa3_probe.configs import BY_NAME, CONFIGS

SOURCE_ENV = "VOICEDESK_FA3"
HERE = Path(__file__).parent
LIBRARY_NAME = "libvd_fa3.so"
FA3_FILES = ("flash_fwd_launch_template.h", "flash.h", "flash_prepare_scheduler.cu")
# SASS for sm_90a only: nvcc 13's -arch=sm_90a also compiles compute_90 PTX (FA3's kernels compiled twice, the
# second time with their sm_90a bodies left out)
GENCODE = ["-gencode", f"arch=compute_{ARCH[3:]},code={ARCH}"]
# FA3's own nvcc flags (hopper/setup.py) less its debugging ones; sm_80 code and the backward are not built
FLAGS = ["-std=c++17", "-O3", *GENCODE, "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
         "--expt-extended-lambda", "--use_fast_math", "-DNDEBUG", "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED",
         "-DCUTLASS_ENABLE_GDC_FOR_SM90", "-DCUTLASS_DEBUG_TRACE_LEVEL=0"]


def find_source(explicit: str | None = None) -> Path:
    """FA3's hopper/ folder, or BuildError."""
    given = explicit or os.environ.get(SOURCE_ENV)
    if not given:
        raise BuildError(f"FA3's source not given: pass --fa3 <flash-attention checkout or its hopper/ folder> "
                         f"(or set ${SOURCE_ENV}); e.g. git -C <flash-attention.git> archive HEAD hopper | tar -x")
    for folder in (Path(given), Path(given) / "hopper"):
        if all((folder / name).is_file() for name in FA3_FILES):
            return folder
    raise BuildError(f"{given} holds no FA3 hopper/ sources ({', '.join(FA3_FILES)} not found there or in hopper/)")


def compile_command(nvcc: Path, *, fa3: Path, headers: Path, source: Path, obj: Path,
                    defines: list[str] = ()) -> list[str]:
    """nvcc's command line for one object."""
    return [str(nvcc), *FLAGS, f"-I{fa3}", f"-I{headers / 'include'}", f"-I{headers / 'tools' / 'util' / 'include'}",
            f"-I{HERE}", *defines, "-c", str(source), "-o", str(obj)]


def link_command(nvcc: Path, objects: list[Path], library: Path) -> list[str]:
    return [str(nvcc), "-shared", f"-arch={ARCH}", "-cudart", "static", *map(str, objects), "-o", str(library)]


def _compile(job: tuple[list[str], Path, Path]) -> None:
    """Run the command unless its object was built by the same command after its source last changed."""
    command, source, obj = job
    stamp = obj.with_suffix(".cmd")
    newest_input = max(path.stat().st_mtime for path in (source, HERE / "status.h"))
    if obj.is_file() and stamp.is_file() and stamp.read_text() == " ".join(command) \
            and obj.stat().st_mtime > newest_input:
        return
    _run(command)
    stamp.write_text(" ".join(command))


def build(out: Path, *, fa3: Path, headers: Path, nvcc: Path, configs: list, jobs: int) -> Path:
    """Compile each configuration's two objects and the scheduler's, link them into out/libvd_fa3.so."""
    out.mkdir(parents=True, exist_ok=True)
    objects = [(fa3 / "flash_prepare_scheduler.cu", out / "prepare_scheduler.o", [])]
    objects += [(HERE / f"{part}.cu", out / f"{part}_{config.name}.o", config.defines())
                for config in configs for part in ("kernel", "entry")]
    commands = [(compile_command(nvcc, fa3=fa3, headers=headers, source=source, obj=obj, defines=defines), source, obj)
             for source, obj, defines in objects]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(_compile, commands))
    library = out / LIBRARY_NAME
    _run(link_command(nvcc, [obj for _, obj, _ in objects], library))
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fa3", help="flash-attention checkout (or its hopper/ folder)")
    parser.add_argument("--cutlass", help="folder with CUTLASS's include/ and tools/util/include/")
    parser.add_argument("--nvcc")
    parser.add_argument("--out", type=Path, default=Path("build/fa3_probe"))
    parser.add_argument("--configs", nargs="+", choices=sorted(BY_NAME), help="default: all")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    try:
        fa3, headers, nvcc = find_source(args.fa3), find_headers(args.cutlass), find_nvcc(args.nvcc)
        configs = [BY_NAME[name] for name in args.configs] if args.configs else list(CONFIGS)
        library = build(args.out, fa3=fa3, headers=headers, nvcc=nvcc, configs=configs, jobs=args.jobs)
    except BuildError as error:
        print(f"build failed: {error}", file=sys.stderr)
        return 1
    print(library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
