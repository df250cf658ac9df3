"""cuBLASLt GEMMs run with an algorithm we choose: y[M, N] = x[M, K] @ w[N, K]^T, as nn.Linear computes it.

A measurement instrument (`tools/kernels/bench_cublaslt.py`), not a product path: PyTorch runs whichever
algorithm cuBLAS ranks first, and this asks what else cuBLASLt offers at the LM's shapes. One `LtMatmul` per
GEMM problem lists candidates: the heuristic's results, split-K / swizzle variants of its first, and on request
configurations built from every algorithm id with cublasLtMatmulAlgoInit + CUBLASLT_ALGO_CONFIG_* (tiles,
stages, split-K; NVIDIA's LtSgemmCustomFind sample), each checked with cublasLtMatmulAlgoCheck. Calling it
runs one candidate on PyTorch's current stream with a preallocated workspace: no allocation and no sync, so
calls capture into CUDA graphs. `choose` is the rule for picking one from measurements. What it found on the
H200: BENCHMARKS.md, "cuBLASLt's other algorithms at small M".

Layout: cuBLASLt is column-major. Row-major x [M, K] is column-major K x M (ld K), w [N, K] is K x N (ld K)
and y [M, N] is N x M (ld N). So cuBLASLt computes D (N x M) = op(A) B with A = w transposed ("T") and
B = x ("N"): its m, n, k are our N, M, K, the "TN" GEMM PyTorch issues for a linear.

FP8: e4m3 x and w with fp32 scales per row of each (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: A's
vector has cuBLASLt's m = our N elements, one per output channel; B's our M, one per token), fp16 out. cuBLASLt
13.1 refuses it on the H200 (the heuristic answers CUBLAS_STATUS_INVALID_VALUE).

The enum values and struct layouts below are CUDA 13's (cublasLt.h of the nvidia-cublas 13 wheel,
cublas_api.h, library_types.h); tests/tools/test_cublaslt_abi.py compiles them against the header.
"""
import ctypes
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import torch

from kernels._cuda_libs import library_candidates, load_first

ENV_VAR = "VOICEDESK_CUBLASLT"
WORKSPACE_BYTES = 32 * 1024 * 1024  # what cuBLAS recommends on Hopper
ALIGNMENT = 256  # bytes: the heuristic's default minimum alignment of A, B, C, D, which calls must keep
TIE = 0.03  # a candidate must beat the default algorithm by more than this fraction to be chosen


class DataType(IntEnum):  # cudaDataType_t
    CUDA_R_32F = 0
    CUDA_R_16F = 2
    CUDA_R_8F_E4M3 = 28


class Status(IntEnum):  # cublasStatus_t
    CUBLAS_STATUS_SUCCESS = 0
    CUBLAS_STATUS_NOT_INITIALIZED = 1
    CUBLAS_STATUS_ALLOC_FAILED = 3
    CUBLAS_STATUS_INVALID_VALUE = 7
    CUBLAS_STATUS_ARCH_MISMATCH = 8
    CUBLAS_STATUS_MAPPING_ERROR = 11
    CUBLAS_STATUS_EXECUTION_FAILED = 13
    CUBLAS_STATUS_INTERNAL_ERROR = 14
    CUBLAS_STATUS_NOT_SUPPORTED = 15


class Misc(IntEnum):  # single values of several enums
    CUBLAS_COMPUTE_32F = 68
    CUBLAS_OP_N = 0
    CUBLAS_OP_T = 1
    CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F = 3
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1


class Desc(IntEnum):  # cublasLtMatmulDescAttributes_t
    CUBLASLT_MATMUL_DESC_TRANSA = 3
    CUBLASLT_MATMUL_DESC_TRANSB = 4
    CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17
    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18
    CUBLASLT_MATMUL_DESC_A_SCALE_MODE = 31
    CUBLASLT_MATMUL_DESC_B_SCALE_MODE = 32


class Cap(IntEnum):  # cublasLtMatmulAlgoCapAttributes_t
    CUBLASLT_ALGO_CAP_SPLITK_SUPPORT = 0
    CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK = 1
    CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT = 2
    CUBLASLT_ALGO_CAP_TILE_IDS = 6
    CUBLASLT_ALGO_CAP_STAGES_IDS = 13


class Config(IntEnum):  # cublasLtMatmulAlgoConfigAttributes_t
    CUBLASLT_ALGO_CONFIG_ID = 0
    CUBLASLT_ALGO_CONFIG_TILE_ID = 1
    CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2
    CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3
    CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4
    CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION = 5
    CUBLASLT_ALGO_CONFIG_STAGES_ID = 6
    CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID = 7
    CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8


class Reduction(IntEnum):  # cublasLtReductionScheme_t: how split-K's partial sums are added
    CUBLASLT_REDUCTION_SCHEME_NONE = 0
    CUBLASLT_REDUCTION_SCHEME_INPLACE = 1
    CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2
    CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4


# Split-K reductions that round each partial sum to the output type (fp16) before adding: more rounding than one
# fp16 rounding of an fp32 sum, so their outputs may miss the High-fidelity contract (the checks then reject them).
ROUNDING_REDUCTIONS = (Reduction.CUBLASLT_REDUCTION_SCHEME_INPLACE, Reduction.CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)


# Each config attribute's C type (the size cublasLtMatmulAlgoConfigSetAttribute checks).
_CONFIG_TYPES = {Config.CUBLASLT_ALGO_CONFIG_ID: ctypes.c_int32, Config.CUBLASLT_ALGO_CONFIG_TILE_ID: ctypes.c_uint32,
                 Config.CUBLASLT_ALGO_CONFIG_SPLITK_NUM: ctypes.c_int32,
                 Config.CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: ctypes.c_uint32,
                 Config.CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING: ctypes.c_uint32,
                 Config.CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION: ctypes.c_uint32,
                 Config.CUBLASLT_ALGO_CONFIG_STAGES_ID: ctypes.c_uint32,
                 Config.CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID: ctypes.c_uint16,
                 Config.CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID: ctypes.c_uint16}


class Algo(ctypes.Structure):  # cublasLtMatmulAlgo_t: serializable for the same cuBLASLt version
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):  # cublasLtMatmulHeuristicResult_t
    _fields_ = [("algo", Algo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


@dataclass(frozen=True)
class AlgoConfig:
    """The readable part of an algorithm (its CUBLASLT_ALGO_CONFIG_* values; ids as in cublasLt.h's enums)."""

    algo_id: int
    tile: int
    stages: int
    splitk: int
    reduction: int
    swizzle: int
    custom: int
    inner_shape: int
    cluster_shape: int


@dataclass(frozen=True)
class Candidate:
    """One algorithm for one problem. source: "heuristic i" (the heuristic's i-th; "heuristic 0" is what
    cuBLASLt runs by default), "split of heuristic 0" or "grid"."""

    source: str
    config: AlgoConfig
    algo: bytes  # the cublasLtMatmulAlgo_t's 64 bytes
    workspace: int  # bytes it needs
    waves: float  # cuBLASLt's estimate of how many times it fills the GPU

    @property
    def is_default(self) -> bool:
        return self.source == "heuristic 0"


@dataclass(frozen=True)
class Trial:
    """A candidate's measurement: whether its output passed the check, and its time (us per call)."""

    candidate: Candidate
    correct: bool
    us: float


def choose(trials: Sequence[Trial], tie: float = TIE) -> Trial | None:
    """The fastest correct trial; the default algorithm's when it is within `tie` of that (a candidate
    must pay for leaving the default); None when none is correct. A failed check never wins."""
    correct = [t for t in trials if t.correct]
    if not correct:
        return None
    best = min(correct, key=lambda t: t.us)
    default = next((t for t in correct if t.candidate.is_default), None)
    return default if default is not None and default.us <= best.us * (1 + tie) else best


# --- the library ---------------------------------------------------------------------------------

class _Lt:
    def __init__(self):
        candidates = library_candidates(env_var=ENV_VAR, linux_name="libcublasLt", windows_pattern="cublasLt64_*.dll")
        self.lib = load_first(candidates, what="cuBLASLt (libcublasLt)", env_var=ENV_VAR)
        self.lib.cublasLtGetVersion.restype = ctypes.c_size_t
        self.version = int(self.lib.cublasLtGetVersion())
        p, i32, u64, i64, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
        self.lib.cublasLtMatrixLayoutCreate.argtypes = [p, i32, u64, u64, i64]
        self.lib.cublasLtMatmulDescCreate.argtypes = [p, i32, i32]
        for name in ("cublasLtMatmulDescSetAttribute", "cublasLtMatmulPreferenceSetAttribute"):
            getattr(self.lib, name).argtypes = [p, i32, p, size]
        self.lib.cublasLtMatmulAlgoConfigSetAttribute.argtypes = [p, i32, p, size]
        self.lib.cublasLtMatmulAlgoConfigGetAttribute.argtypes = [p, i32, p, size, p]
        self.lib.cublasLtMatmulAlgoCapGetAttribute.argtypes = [p, i32, p, size, p]
        self.lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [p, p, p, p, p, p, p, i32, p, p]
        self.lib.cublasLtMatmulAlgoGetIds.argtypes = [p, i32, i32, i32, i32, i32, i32, i32, p, p]
        self.lib.cublasLtMatmulAlgoInit.argtypes = [p, i32, i32, i32, i32, i32, i32, i32, p]
        self.lib.cublasLtMatmulAlgoCheck.argtypes = [p, p, p, p, p, p, p, p]
        self.lib.cublasLtMatmul.argtypes = [p] * 14 + [size, p]
        self.handles: dict[int, ctypes.c_void_p] = {}

    def handle(self, device_index: int) -> ctypes.c_void_p:
        if device_index not in self.handles:
            handle = ctypes.c_void_p()
            with torch.cuda.device(device_index):
                check(self.lib.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
            self.handles[device_index] = handle
        return self.handles[device_index]


def check(status: int, what: str) -> None:
    if status != 0:
        name = Status(status).name if status in Status._value2member_map_ else str(status)
        raise RuntimeError(f"cuBLASLt: {what} failed with {name}")


@functools.cache
def _library() -> _Lt:
    return _Lt()


def unavailable_reason() -> str | None:
    """Why cuBLASLt cannot be used in this process (None when it can): no library, or no CUDA GPU."""
    if not torch.cuda.is_available():
        return "no CUDA GPU (PyTorch sees none)"
    try:
        _library()
    except (RuntimeError, OSError, AttributeError) as e:
        return str(e)
    return None


def available() -> bool:
    return unavailable_reason() is None


def version() -> int:
    """cuBLASLt's version number (major * 10000 + minor * 100 + patch); algorithms are valid within one."""
    return _library().version


@functools.cache
def shared_workspace(device: torch.device) -> torch.Tensor:
    """One workspace per device for every LtMatmul that is not given its own (calls on one stream at a time)."""
    return torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)


# --- one GEMM problem ----------------------------------------------------------------------------

_TORCH_TYPES = {torch.float16: DataType.CUDA_R_16F, torch.float8_e4m3fn: DataType.CUDA_R_8F_E4M3}


class LtMatmul:
    """y[M, N] (fp16) = x[M, K] @ w[N, K]^T for one (M, N, K) with x and w fp16, or e4m3 with per-row scales.

    Parameters
    ----------
    m, n, k : int
        The problem: rows of x, rows of w (output features), the shared inner size.
    dtype : torch.dtype
        torch.float16, or torch.float8_e4m3fn (then each call takes x_scales [M] and w_scales [N], fp32).
    device : torch.device
        The CUDA device the calls run on.
    workspace : torch.Tensor, optional
        uint8 scratch for split-K; `shared_workspace(device)` when None. It must outlive captured graphs.
    """

    def __init__(self, m: int, n: int, k: int, *, dtype: torch.dtype = torch.float16,
                 device: torch.device | str = "cuda", workspace: torch.Tensor | None = None):
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"cuBLASLt is not available: {reason}")
        if dtype not in _TORCH_TYPES:
            raise ValueError(f"LtMatmul takes float16 or float8_e4m3fn operands, not {dtype}")
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"LtMatmul runs on a CUDA device, not {device}")
        self.device = torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())
        self.m, self.n, self.k, self.dtype = m, n, k, dtype
        self.workspace = shared_workspace(self.device) if workspace is None else workspace
        self.fp8 = dtype == torch.float8_e4m3fn
        self._lt = _library()
        self._handle = self._lt.handle(self.device.index)
        self._alpha, self._beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        lib, operand = self._lt.lib, _TORCH_TYPES[dtype]
        self._types = (operand, operand, DataType.CUDA_R_16F, DataType.CUDA_R_16F)  # A, B, C, D
        self._desc = ctypes.c_void_p()
        check(lib.cublasLtMatmulDescCreate(ctypes.byref(self._desc), Misc.CUBLAS_COMPUTE_32F, DataType.CUDA_R_32F),
              "cublasLtMatmulDescCreate")
        self._set(lib.cublasLtMatmulDescSetAttribute, self._desc, Desc.CUBLASLT_MATMUL_DESC_TRANSA,
                  ctypes.c_int32(Misc.CUBLAS_OP_T))
        self._set(lib.cublasLtMatmulDescSetAttribute, self._desc, Desc.CUBLASLT_MATMUL_DESC_TRANSB,
                  ctypes.c_int32(Misc.CUBLAS_OP_N))
        if self.fp8:
            for attr in (Desc.CUBLASLT_MATMUL_DESC_A_SCALE_MODE, Desc.CUBLASLT_MATMUL_DESC_B_SCALE_MODE):
                self._set(lib.cublasLtMatmulDescSetAttribute, self._desc, attr,
                          ctypes.c_int32(Misc.CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F))
        # Column-major: A = w as K x N, B = x as K x M, C = D = y as N x M.
        self._layouts = [self._layout(operand, k, n), self._layout(operand, k, m),
                         self._layout(DataType.CUDA_R_16F, n, m)]

    def _set(self, setter, obj, attr: int, value) -> None:
        check(setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), f"setting attribute {attr!r}")

    def _layout(self, dtype: int, rows: int, cols: int) -> ctypes.c_void_p:
        layout = ctypes.c_void_p()
        check(self._lt.lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype, rows, cols, rows),
              "cublasLtMatrixLayoutCreate")
        return layout

    @property
    def _abcd(self) -> list[ctypes.c_void_p]:
        a, b, c = self._layouts
        return [a, b, c, c]

    def __del__(self):
        lt = getattr(self, "_lt", None)
        if lt is None:
            return
        for layout in getattr(self, "_layouts", []):
            lt.lib.cublasLtMatrixLayoutDestroy(layout)
        if getattr(self, "_desc", None):
            lt.lib.cublasLtMatmulDescDestroy(self._desc)

    # --- listing candidates -----------------------------------------------------------------------

    def candidates(self, heuristic_count: int = 64, splits: Sequence[int] = (1, 2, 3, 4, 6, 8),
                   grid_limit: int = 0) -> list[Candidate]:
        """Each algorithm once, the default first: the heuristic's results, split-K and swizzle variants of
        the default, and the `grid_limit` grid configurations that fill the GPU's waves best (none by default:
        on the H200 every one was slower than the heuristic's, 2026-12-04)."""
        found, seen = [], set()
        default = self.heuristic(heuristic_count)
        grid = self.grid(splits, grid_limit) if grid_limit else []
        for candidate in [*default, *self.variants(default[:1], splits), *grid]:
            if candidate.algo not in seen:
                seen.add(candidate.algo)
                found.append(candidate)
        return found

    def heuristic(self, count: int = 64) -> list[Candidate]:
        """cuBLASLt's heuristic's best `count` algorithms for this problem within the workspace, best first
        (it gave 8 at most on the H200, whatever the count)."""
        lib = self._lt.lib
        preference = ctypes.c_void_p()
        check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)), "cublasLtMatmulPreferenceCreate")
        try:
            self._set(lib.cublasLtMatmulPreferenceSetAttribute, preference,
                      Misc.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(self.workspace.numel()))
            results, returned = (HeuristicResult * count)(), ctypes.c_int()
            with torch.cuda.device(self.device):
                check(lib.cublasLtMatmulAlgoGetHeuristic(self._handle, self._desc, *self._abcd, preference, count,
                                                         results, ctypes.byref(returned)),
                      "cublasLtMatmulAlgoGetHeuristic")
        finally:
            lib.cublasLtMatmulPreferenceDestroy(preference)
        return [self._candidate(f"heuristic {i}", r.algo, r.workspaceSize, r.wavesCount)
                for i, r in enumerate(results[:returned.value]) if r.state == 0]

    def variants(self, bases: Sequence[Candidate], splits: Sequence[int]) -> list[Candidate]:
        """Each base with K split `splits` ways (each reduction scheme) and with CTA swizzling, where valid."""
        found = []
        for base in bases:
            for split in splits:
                for reduction in _reductions(split, mask=0x7):
                    for swizzle in (0, 1):
                        algo = self._configured(base.algo, splitk=split, reduction=reduction,
                                                swizzle=swizzle)
                        checked = self._check(algo)
                        if checked is not None:
                            found.append(self._candidate(f"split of {base.source}", algo, *checked))
        return found

    def grid(self, splits: Sequence[int], limit: int) -> list[Candidate]:
        """Configurations built from every algorithm id (tiles x stages x split-K x reduction), valid per
        cublasLtMatmulAlgoCheck; the `limit` whose last wave is fullest (waves / ceil(waves)), since at
        small M the default leaves most multiprocessors idle."""
        lib = self._lt.lib
        ids, returned = (ctypes.c_int * 256)(), ctypes.c_int()
        check(lib.cublasLtMatmulAlgoGetIds(self._handle, Misc.CUBLAS_COMPUTE_32F, DataType.CUDA_R_32F, *self._types,
                                           256, ids, ctypes.byref(returned)), "cublasLtMatmulAlgoGetIds")
        found = []
        for algo_id in ids[:returned.value]:
            algo = Algo()
            if lib.cublasLtMatmulAlgoInit(self._handle, Misc.CUBLAS_COMPUTE_32F, DataType.CUDA_R_32F, *self._types,
                                          algo_id, ctypes.byref(algo)) != 0:
                continue
            tiles = self._cap_list(algo, Cap.CUBLASLT_ALGO_CAP_TILE_IDS) or [0]
            stages = self._cap_list(algo, Cap.CUBLASLT_ALGO_CAP_STAGES_IDS) or [0]
            can_split = self._cap_value(algo, Cap.CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, ctypes.c_int32)
            mask = self._cap_value(algo, Cap.CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, ctypes.c_uint32)
            pairs = [(tile, stage) for tile in tiles for stage in stages
                     if self._check(self._configured(algo, tile=tile, stages=stage)) is not None]
            for tile, stage in pairs:  # the split-K variants of the (tile, stages) pairs that run unsplit
                for split in splits if can_split else (1,):
                    for reduction in _reductions(split, mask):
                        trial = self._configured(algo, tile=tile, stages=stage, splitk=split, reduction=reduction)
                        checked = self._check(trial)
                        if checked is not None:
                            found.append(self._candidate("grid", trial, *checked))
        found.sort(key=lambda c: (-c.waves / max(1, -(-c.waves // 1)), c.config.splitk))
        return found[:limit]

    def _configured(self, base: Algo | bytes, **values: int) -> Algo:
        """A copy of base with these CUBLASLT_ALGO_CONFIG_* values (tile, stages, splitk, reduction, swizzle)."""
        algo = Algo.from_buffer_copy(base)
        names = {"tile": Config.CUBLASLT_ALGO_CONFIG_TILE_ID, "stages": Config.CUBLASLT_ALGO_CONFIG_STAGES_ID,
                 "splitk": Config.CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                 "reduction": Config.CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                 "swizzle": Config.CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING}
        for name, value in values.items():
            attr = names[name]
            c_value = _CONFIG_TYPES[attr](value)
            # An algorithm without the option refuses it; AlgoCheck then judges the result.
            self._lt.lib.cublasLtMatmulAlgoConfigSetAttribute(ctypes.byref(algo), attr, ctypes.byref(c_value),
                                                              ctypes.sizeof(c_value))
        return algo

    def _check(self, algo: Algo) -> tuple[int, float] | None:
        """(workspace bytes, waves) when cuBLASLt accepts algo for this problem within the workspace."""
        result = HeuristicResult()
        with torch.cuda.device(self.device):
            status = self._lt.lib.cublasLtMatmulAlgoCheck(self._handle, self._desc, *self._abcd, ctypes.byref(algo),
                                                          ctypes.byref(result))
        if status != 0 or result.workspaceSize > self.workspace.numel():
            return None
        return result.workspaceSize, result.wavesCount

    def _cap_list(self, algo: Algo, attr: int) -> list[int]:
        """An array-valued capability (uint32 ids); [] when the algorithm has none."""
        lib, written = self._lt.lib, ctypes.c_size_t()
        if lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, None, 0, ctypes.byref(written)) != 0:
            return []
        values = (ctypes.c_uint32 * max(1, written.value // 4))()
        check(lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, values, ctypes.sizeof(values),
                                                    ctypes.byref(written)), "cublasLtMatmulAlgoCapGetAttribute")
        return list(values[:written.value // 4])

    def _cap_value(self, algo: Algo, attr: int, c_type) -> int:
        """A scalar capability; 0 when the algorithm does not say."""
        value, written = c_type(), ctypes.c_size_t()
        status = self._lt.lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, ctypes.byref(value),
                                                                ctypes.sizeof(value), ctypes.byref(written))
        return value.value if status == 0 else 0

    def _candidate(self, source: str, algo: Algo, workspace: int, waves: float) -> Candidate:
        values = {}
        for attr, c_type in _CONFIG_TYPES.items():
            value, written = c_type(), ctypes.c_size_t()
            self._lt.lib.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(algo), attr, ctypes.byref(value),
                                                              ctypes.sizeof(value), ctypes.byref(written))
            values[attr] = value.value
        config = AlgoConfig(*(values[attr] for attr in _CONFIG_TYPES))
        return Candidate(source, config, bytes(algo), int(workspace), float(waves))

    # --- running ----------------------------------------------------------------------------------

    def __call__(self, x: torch.Tensor, w: torch.Tensor, candidate: Candidate, *, out: torch.Tensor | None = None,
                 x_scales: torch.Tensor | None = None, w_scales: torch.Tensor | None = None) -> torch.Tensor:
        """y = x @ w^T (times x_scales[:, None] * w_scales[None, :] for FP8) with candidate's algorithm, on the
        current stream. Allocates only `out` when it is None: pass `out` inside a CUDA-graph capture."""
        for name, t, shape in (("x", x, (self.m, self.k)), ("w", w, (self.n, self.k))):
            _check_operand(name, t, shape, self.dtype, self.device)
        if out is None:
            out = torch.empty(self.m, self.n, dtype=torch.float16, device=self.device)
        _check_operand("out", out, (self.m, self.n), torch.float16, self.device)
        lib = self._lt.lib
        if self.fp8:
            if x_scales is None or w_scales is None:
                raise ValueError("an FP8 LtMatmul needs x_scales [M] and w_scales [N]")
            _check_operand("x_scales", x_scales, (self.m,), torch.float32, self.device, alignment=16)
            _check_operand("w_scales", w_scales, (self.n,), torch.float32, self.device, alignment=16)
            self._set(lib.cublasLtMatmulDescSetAttribute, self._desc, Desc.CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                      ctypes.c_void_p(w_scales.data_ptr()))
            self._set(lib.cublasLtMatmulDescSetAttribute, self._desc, Desc.CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                      ctypes.c_void_p(x_scales.data_ptr()))
        elif x_scales is not None or w_scales is not None:
            raise ValueError("scales belong to FP8 operands only")
        if candidate.workspace > self.workspace.numel():
            raise ValueError(f"the candidate needs {candidate.workspace} bytes of workspace, "
                             f"this LtMatmul has {self.workspace.numel()}")
        algo = Algo.from_buffer_copy(candidate.algo)
        a, b, c = self._layouts
        stream = torch.cuda.current_stream(self.device).cuda_stream
        y = ctypes.c_void_p(out.data_ptr())
        check(lib.cublasLtMatmul(self._handle, self._desc, ctypes.byref(self._alpha), ctypes.c_void_p(w.data_ptr()),
                                 a, ctypes.c_void_p(x.data_ptr()), b, ctypes.byref(self._beta), y, c, y, c,
                                 ctypes.byref(algo), ctypes.c_void_p(self.workspace.data_ptr()),
                                 self.workspace.numel(), ctypes.c_void_p(stream)), "cublasLtMatmul")
        return out


def _reductions(split: int, mask: int) -> list[int]:
    """The reduction schemes a split into `split` K slices may use (of those in mask); none without a split."""
    if split == 1:
        return [Reduction.CUBLASLT_REDUCTION_SCHEME_NONE]
    return [r for r in Reduction if r and mask & r]


def _check_operand(name: str, t: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype,
                   device: torch.device, alignment: int = ALIGNMENT) -> None:
    if tuple(t.shape) != shape or t.dtype != dtype or t.device != device:
        raise ValueError(f"{name}: expected {shape} {dtype} on {device}, got {tuple(t.shape)} {t.dtype} on {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
    if t.data_ptr() % alignment:
        raise ValueError(f"{name} must start at a {alignment}-byte aligned address (the algorithms assume it)")
