"""W4A4 GEMM on INT4 tensor cores: `csrc/w4a4_gemm.cu`, compiled at run time by NVRTC.

No CUDA toolkit is needed on the user's machine: PyTorch's CUDA wheels ship libnvrtc, and the driver
(libcuda) loads the cubin. Cubins are kept in the `CubinCache` the caller passes (the engine's is in
the user cache directory), keyed by source hash, options, NVRTC version and arch. Native INT4 MMA
(SASS IMMA.16864.S4.S4) exists on sm_80/86/87/89 only:
sm_90, sm_100 and sm_120 compile the same PTX to a slow emulation routine (checked with nvcc 13.0
cubins), so those GPUs take the Triton int8 path.
"""
import ctypes
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernels import _launch
from kernels._cuda_libs import library_candidates, load_first
from kernels.w4a4_ref import GROUP, QuantizedAct

SOURCE = Path(__file__).parent / "csrc" / "w4a4_gemm.cu"
NATIVE_INT4_ARCHS = (80, 86, 87, 89)


@dataclass(frozen=True)
class Tile:
    """CTA tile and warp grid (the -D options of the source)."""

    bm: int
    bn: int
    warps_m: int
    warps_n: int

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * 32


LARGE = Tile(128, 128, 2, 4)
SMALL = Tile(64, 64, 2, 2)  # more CTAs when M * N is small


@dataclass(frozen=True)
class CubinCache:
    """Where compiled cubins are kept between runs: a folder (made when first written to), and how to
    write a file there so that a process reading it at the same time sees all of it or nothing."""

    folder: Path
    write: Callable[[Path, bytes], None]  # write(path, data), atomically


# --- NVRTC ---------------------------------------------------------------------------------------

NVRTC_ENV = "VOICEDESK_NVRTC"  # an explicit path to libnvrtc, tried first
NVRTC_COMPANIONS = (".alt.",)  # Windows' nvrtc64_*.alt.dll matches NVRTC's glob but is another build of it


def nvrtc_candidates() -> list[str]:
    """Where libnvrtc may be, best first (`library_candidates`), without its companion builds."""
    return library_candidates(env_var=NVRTC_ENV, linux_name="libnvrtc", windows_pattern="nvrtc64_*.dll",
                              skip=NVRTC_COMPANIONS)


class _Nvrtc:
    def __init__(self):
        self.lib = load_first(nvrtc_candidates(), what="NVRTC (libnvrtc)", env_var=NVRTC_ENV)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)))
        self.version = (major.value, minor.value)

    def _check(self, result: int) -> None:
        if result != 0:
            raise RuntimeError(f"NVRTC error: {self.lib.nvrtcGetErrorString(result).decode()}")

    def supported_archs(self) -> list[int]:
        count = ctypes.c_int()
        self._check(self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)))
        archs = (ctypes.c_int * count.value)()
        self._check(self.lib.nvrtcGetSupportedArchs(archs))
        return list(archs)

    def compile(self, source: str, name: str, options: list[str]) -> bytes:
        """Source -> cubin for the real arch named in options (--gpu-architecture=sm_XX)."""
        prog = ctypes.c_void_p()
        self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None))
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            result = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            if result != 0:
                size = ctypes.c_size_t()
                self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                self.lib.nvrtcGetProgramLog(prog, log)
                raise RuntimeError(f"NVRTC could not compile {name}:\n{log.value.decode(errors='replace')}")
            size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)))
            cubin = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetCUBIN(prog, cubin))
            return cubin.raw
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


_nvrtc: _Nvrtc | None = None


def nvrtc() -> _Nvrtc:
    """The process-wide NVRTC handle (loaded on first use)."""
    global _nvrtc
    if _nvrtc is None:
        _nvrtc = _Nvrtc()
    return _nvrtc


def nvrtc_available() -> bool:
    try:
        nvrtc()
        return True
    except (RuntimeError, OSError, AttributeError):
        return False


def compile_options(arch: int, rank: int, out_f16: bool, tile: Tile) -> list[str]:
    return [f"--gpu-architecture=sm_{arch}", f"-DW4A4_BM={tile.bm}", f"-DW4A4_BN={tile.bn}",
            f"-DW4A4_WARPS_M={tile.warps_m}", f"-DW4A4_WARPS_N={tile.warps_n}", f"-DW4A4_RANK={rank}",
            f"-DW4A4_OUT_F16={int(out_f16)}"]


def compile_cubin(arch: int, rank: int = 32, out_f16: bool = True, tile: Tile = LARGE,
                  cache: CubinCache | None = None) -> bytes:
    """The cubin of `csrc/w4a4_gemm.cu` for sm_<arch>, from the cache or freshly compiled.

    Parameters
    ----------
    arch : int
        Compute capability as major * 10 + minor, e.g. 89.
    rank : int
        Low-rank dimension (a multiple of 16).
    out_f16 : bool
        fp16 output, bias and residual if True, else fp32.
    tile : Tile
        CTA tile (`LARGE` or `SMALL`).
    cache : CubinCache, optional
        Where compiled cubins are looked up and stored; None compiles every time.
    """
    source = SOURCE.read_text()
    options = compile_options(arch, rank, out_f16, tile)
    compiler = nvrtc()
    key = hashlib.sha256("\n".join([source, *options, repr(compiler.version)]).encode()).hexdigest()[:20]
    path = None if cache is None else Path(cache.folder) / f"w4a4_gemm-sm{arch}-{key}.cubin"
    if path is not None and path.exists():
        return path.read_bytes()
    cubin = compiler.compile(source, SOURCE.name, options)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cache.write(path, cubin)
    return cubin


# --- CUDA driver ---------------------------------------------------------------------------------

class _Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        self.lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        self.functions: dict[tuple, ctypes.c_void_p] = {}
        self.contexts: dict[int, ctypes.c_void_p] = {}

    def _check(self, result: int) -> None:
        if result != 0:
            message = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(message))
            raise RuntimeError(f"CUDA driver error {result}: {(message.value or b'?').decode()}")

    def _make_context_current(self, device_index: int) -> None:
        # PyTorch works in each device's primary context; a thread that has not used CUDA yet has none.
        if device_index not in self.contexts:
            device, context = ctypes.c_int(), ctypes.c_void_p()
            self._check(self.lib.cuDeviceGet(ctypes.byref(device), device_index))
            self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
            self.contexts[device_index] = context
        current = ctypes.c_void_p()
        self._check(self.lib.cuCtxGetCurrent(ctypes.byref(current)))
        if current.value != self.contexts[device_index].value:
            self._check(self.lib.cuCtxSetCurrent(self.contexts[device_index]))

    def function(self, device_index: int, variant: tuple, cache: CubinCache | None) -> ctypes.c_void_p:
        key = (device_index, variant)
        if key not in self.functions:
            self._make_context_current(device_index)
            module, fn = ctypes.c_void_p(), ctypes.c_void_p()
            cubin = compile_cubin(*variant, cache=cache)
            self._check(self.lib.cuModuleLoadData(ctypes.byref(module), cubin))
            self._check(self.lib.cuModuleGetFunction(ctypes.byref(fn), module, b"w4a4_gemm"))
            self.functions[key] = fn
        return self.functions[key]

    def launch(self, device_index: int, fn, grid, block, args: list) -> None:
        """Launch on PyTorch's current stream; args are ctypes values (c_void_p pointers, c_int)."""
        self._make_context_current(device_index)
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        stream = torch.cuda.current_stream(device_index).cuda_stream
        self._check(self.lib.cuLaunchKernel(fn, *grid, *block, 0, stream, params, None))


_driver: _Driver | None = None


def _get_driver() -> _Driver:
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


# --- public wrapper ------------------------------------------------------------------------------

def arch_of(device: torch.device) -> int:
    major, minor = torch.cuda.get_device_capability(device)
    return major * 10 + minor


def is_supported(device: torch.device) -> bool:
    """True where this kernel runs on native INT4 tensor cores and NVRTC can build it."""
    if device.type != "cuda" or arch_of(device) not in NATIVE_INT4_ARCHS or not nvrtc_available():
        return False
    return arch_of(device) in nvrtc().supported_archs()


def _tile_for(m: int, n: int, device: torch.device) -> Tile:
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    large_ctas = -(-m // LARGE.bm) * -(-n // LARGE.bn)
    return LARGE if large_ctas >= sms else SMALL


def _launch_gemm(act: QuantizedAct, qweight, wscales, lora_up, bias, residual, out, out_dtype, sums, tile, cache):
    m, kb = act.codes.shape
    n, k, rank = qweight.shape[0], kb * 2, lora_up.shape[1]
    device = qweight.device
    if device.type != "cuda" or any(t.device != device for t in (*act, wscales, lora_up)):
        raise ValueError("the CUDA W4A4 GEMM needs all tensors on one CUDA device")
    if rank % 16 or rank == 0:
        raise ValueError(f"the CUDA W4A4 GEMM needs a low-rank dimension that is a multiple of 16, got {rank}")
    for name, t, shape, dtypes in [("act.codes", act.codes, (m, kb), (torch.int8,)),
                                   ("act.scales", act.scales, (m, k // GROUP), (torch.float32,)),
                                   ("act.lowrank", act.lowrank, (m, rank), (torch.float32,)),
                                   ("qweight", qweight, (n, kb), (torch.int8,)),
                                   ("wscales", wscales, (n, k // GROUP), (torch.float32,)),
                                   ("lora_up", lora_up, (n, rank), (torch.float16,))]:
        _launch.check(name, t, shape, dtypes)
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    if act.codes.data_ptr() % 16 or qweight.data_ptr() % 16:
        raise ValueError("packed codes must start at a 16-byte aligned address")
    out_dtype = out_dtype or torch.float16
    if out_dtype not in (torch.float16, torch.float32):
        raise ValueError(f"the CUDA W4A4 GEMM writes fp16 or fp32, not {out_dtype}")
    out = _launch.output("out", out, (m, n), out_dtype, device)
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    if bias is not None:
        _launch.check("bias", bias, (n,), _launch.FLOAT_DTYPES)
        bias = bias.to(out_dtype).contiguous()
    if residual is not None:
        _launch.check("residual", residual, (m, n), _launch.FLOAT_DTYPES)
        residual = residual.to(out_dtype).contiguous()
    tile = tile or _tile_for(m, n, device)
    driver = _get_driver()
    fn = driver.function(device.index, (arch_of(device), rank, out_dtype == torch.float16, tile), cache)

    def ptr(t: torch.Tensor | None) -> ctypes.c_void_p:
        return ctypes.c_void_p(None if t is None else t.data_ptr())

    args = [ptr(act.codes), ptr(act.scales), ptr(qweight), ptr(wscales), ptr(act.lowrank), ptr(lora_up),
            ptr(bias), ptr(residual), ptr(out), ptr(sums), ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]
    grid = (-(-n // tile.bn), -(-m // tile.bm), 1)
    driver.launch(device.index, fn, grid, (tile.threads, 1, 1), args)
    return out


def w4a4_gemm_cuda(act: QuantizedAct, qweight: torch.Tensor, wscales: torch.Tensor, lora_up: torch.Tensor,
                   bias: torch.Tensor | None = None, residual: torch.Tensor | None = None,
                   out: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                   tile: Tile | None = None, cache: CubinCache | None = None) -> torch.Tensor:
    """y = W4A4(act, weight) + act.lowrank @ lora_up^T + bias + residual on INT4 tensor cores.

    Same arguments and result as `kernels.w4a4_triton.w4a4_gemm`, except that the codes are packed
    INT4: act from `quantize_act(..., layout="packed")`, qweight [N, K/2]; lora_up is fp16 and the
    output (and so bias and residual) fp16 (default) or fp32. `tile` forces `LARGE` or `SMALL`;
    `cache` keeps the compiled kernel for later processes (see `compile_cubin`).
    """
    return _launch_gemm(act, qweight, wscales, lora_up, bias, residual, out, out_dtype, None, tile, cache)


def w4a4_gemm_cuda_debug(act: QuantizedAct, qweight: torch.Tensor, wscales: torch.Tensor, lora_up: torch.Tensor,
                         bias: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                         tile: Tile | None = None, cache: CubinCache | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """`w4a4_gemm_cuda` that also returns the int32 group sums [M, N, K/64], for exact tests. It runs
    on any sm_80+ GPU: on sm_90 the INT4 MMA is emulated (slow, still exact), enough for checking."""
    m, n, groups = act.codes.shape[0], qweight.shape[0], act.scales.shape[1]
    sums = torch.empty(m, n, groups, dtype=torch.int32, device=qweight.device)
    out = _launch_gemm(act, qweight, wscales, lora_up, bias, None, None, out_dtype, sums, tile, cache)
    return out, sums
