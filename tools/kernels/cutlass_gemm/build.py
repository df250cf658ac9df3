"""Build gemm.cu's configurations into one shared library with a plain C ABI (no libtorch):

    python -m tools.kernels.cutlass_gemm.build [--cutlass DIR] [--nvcc PATH] [--out DIR] [--configs NAME...]

CUTLASS's headers are not in the repository: written against CUTLASS 4.2.0, i.e. PyPI's nvidia-cutlass 4.2.0.0
(`pip download --no-deps nvidia-cutlass==4.2.0.0`, unzip it anywhere outside the checkout); DIR is the folder
that holds include/cute and tools/util/include (the wheel's cutlass_library/source). Without --cutlass, the
VOICEDESK_CUTLASS environment variable, then an installed cutlass_library package are tried. nvcc: --nvcc, then
$CUDA_HOME/bin/nvcc, then nvcc on PATH. The CUDA runtime is linked statically; the driver's cuTensorMapEncodeTiled
is found at run time through cudaGetDriverEntryPoint (CUTLASS's default), so nothing links libcuda.
One object per configuration, compiled in parallel (about 35 s each on one core of the CPU machine); an object
whose command line is unchanged and that is newer than every source is kept.
"""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.kernels.cutlass_gemm.configs import BY_NAME, CONFIGS, Config

CUTLASS_VERSION = "4.2.0"  # the headers gemm.cu was written and checked against (nvidia-cutlass 4.2.0.0)
HEADERS_ENV = "VOICEDESK_CUTLASS"
SOURCE_DIR = Path(__file__).parent  # gemm.cu, gemm_swiglu.cu and the headers they share
LIBRARY_NAME = "libvd_cutlass_gemm.so"
ARCH = "sm_90a"  # wgmma and TMA need the arch-specific target
HOW_TO_GET_HEADERS = (f"pip download --no-deps nvidia-cutlass=={CUTLASS_VERSION}.0, unzip the wheel outside the "
                      f"checkout and pass --cutlass <unzipped>/cutlass_library/source (or set {HEADERS_ENV})")


class BuildError(RuntimeError):
    """What is missing or what failed, said so that the next step is clear."""


def _has_headers(root: Path) -> bool:
    return all((root / "include" / header).is_file() for header in ("cute/tensor.hpp", "cutlass/cutlass.h"))


def find_headers(explicit: str | None = None) -> Path:
    """The CUTLASS source folder (with include/ and tools/util/include/), or BuildError."""
    tried = []
    candidates = [explicit] if explicit else [os.environ.get(HEADERS_ENV)]
    if not explicit:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is not None and spec.origin:
            candidates.append(str(Path(spec.origin).parent / "source"))
    for candidate in filter(None, candidates):
        tried.append(candidate)
        if _has_headers(Path(candidate)):
            if not (Path(candidate) / "tools/util/include/cutlass/util/packed_stride.hpp").is_file():
                raise BuildError(f"{candidate} has CUTLASS's include/ but not tools/util/include/ (packed_stride.hpp)")
            return Path(candidate)
    where = ", ".join(tried) if tried else "nowhere (no --cutlass, no $" + HEADERS_ENV + ", no cutlass_library)"
    raise BuildError(f"CUTLASS headers (include/cute/tensor.hpp) not found; looked in {where}. {HOW_TO_GET_HEADERS}")


def find_nvcc(explicit: str | None = None) -> Path:
    """The nvcc to build with, or BuildError."""
    candidates = [explicit] if explicit else [
        os.environ.get("CUDA_HOME") and str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"), shutil.which("nvcc")]
    for candidate in filter(None, candidates):
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise BuildError(f"nvcc not found ({'--nvcc ' + explicit if explicit else '$CUDA_HOME/bin, PATH'}): a CUDA "
                     f"toolkit >= 12.0 with {ARCH} is needed to build")


def compile_command(nvcc: Path, headers: Path, config: Config, obj: Path) -> list[str]:
    """nvcc's command line for one configuration's object."""
    return [str(nvcc), "-std=c++17", "-O3", f"-arch={ARCH}", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
            "-DNDEBUG", f"-I{headers / 'include'}", f"-I{headers / 'tools' / 'util' / 'include'}",
            f"-I{SOURCE_DIR}", *config.defines(), "-c", str(SOURCE_DIR / config.source), "-o", str(obj)]


def link_command(nvcc: Path, objects: list[Path], library: Path) -> list[str]:
    return [str(nvcc), "-shared", f"-arch={ARCH}", "-cudart", "static", *map(str, objects), "-o", str(library)]


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(command)}\nfailed ({done.returncode}):\n{done.stdout}{done.stderr}")


def is_fresh(obj: Path, command: list[str]) -> bool:
    """Whether obj was made by this command line (its .cmd beside it) after every source last changed."""
    record = obj.with_suffix(".cmd")
    if not (obj.is_file() and record.is_file()) or record.read_text() != "\n".join(command):
        return False
    newest = max(p.stat().st_mtime for p in SOURCE_DIR.iterdir() if p.suffix in (".cu", ".h"))
    return obj.stat().st_mtime > newest


def _compile(command: list[str], obj: Path) -> None:
    if not is_fresh(obj, command):
        _run(command)
        obj.with_suffix(".cmd").write_text("\n".join(command))


def build(out: Path, headers: Path, nvcc: Path, configs: list[Config], jobs: int) -> Path:
    """Compile each configuration and link them into out/libvd_cutlass_gemm.so; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    objects = [out / f"{config.name}.o" for config in configs]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(_compile, [compile_command(nvcc, headers, c, o) for c, o in zip(configs, objects)], objects))
    library = out / LIBRARY_NAME
    _run(link_command(nvcc, objects, library))
    return library


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutlass", help="folder with CUTLASS's include/ and tools/util/include/")
    parser.add_argument("--nvcc")
    parser.add_argument("--out", type=Path, default=Path("build/cutlass_gemm"))
    parser.add_argument("--configs", nargs="+", choices=sorted(BY_NAME), help="default: all")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    try:
        headers, nvcc = find_headers(args.cutlass), find_nvcc(args.nvcc)
        configs = [BY_NAME[name] for name in args.configs] if args.configs else list(CONFIGS)
        library = build(args.out, headers, nvcc, configs, args.jobs)
    except BuildError as error:
        print(f"build failed: {error}", file=sys.stderr)
        return 1
    print(library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
