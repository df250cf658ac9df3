"""ctypes binding of the library build.py makes: y = x @ weight.T (`linear`), or y = silu(gate) * up of the gate_up
projection with the SwiGLU in the GEMM's epilogue (`swiglu`, the weight as `interleave_gate_up` lays it out),
through one of CONFIGS by name.

The library takes raw device pointers and the caller's CUDA stream (PyTorch's current one), so calls are
captured into CUDA graphs like any kernel. Workspace (stream-K and split-K need it) comes from the caller,
allocated once: `workspace_bytes` says how much a call needs.
"""
import ctypes
from pathlib import Path

import torch

from tools.kernels.cutlass_gemm.configs import BY_NAME, CONFIGS, INTERLEAVE


class CutlassError(RuntimeError):
    """A call the library refused or failed (its status string)."""


def check_operands(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None) -> None:
    """ValueError unless x [M, K] and weight [N, K] are contiguous fp16 on one CUDA device, K and N multiples of 8
    (TMA's 16-byte rows), and out (if given) is a contiguous fp16 [M, N] there too."""
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x [M, K] and weight [N, K] wanted, got {tuple(x.shape)} and {tuple(weight.shape)}")
    m, k = x.shape
    n = weight.shape[0]
    if k % 8 or n % 8:
        raise ValueError(f"K ({k}) and N ({n}) must be multiples of 8")
    if out is not None and tuple(out.shape) != (m, n):
        raise ValueError(f"out must be [{m}, {n}], got {tuple(out.shape)}")
    tensors = {"x": x, "weight": weight} | ({} if out is None else {"out": out})
    for name, t in tensors.items():
        if t.dtype != torch.float16 or not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous fp16, got {t.dtype} with strides {t.stride()}")
    for name, t in tensors.items():
        if t.device.type != "cuda" or t.device != x.device:
            raise ValueError(f"{name} must be on x's CUDA device, got {t.device} (x on {x.device})")


def interleave_gate_up(weight: torch.Tensor) -> torch.Tensor:
    """The gate_up weight [2I, K] (I gate rows, then I up rows) in the row order gemm_swiglu.cu reads: blocks of
    INTERLEAVE gate rows, each followed by the up rows of the same outputs."""
    rows, k = weight.shape
    if rows % (2 * INTERLEAVE):
        raise ValueError(f"gate_up's rows ({rows}) must be a multiple of {2 * INTERLEAVE}")
    gate, up = weight.reshape(2, rows // (2 * INTERLEAVE), INTERLEAVE, k).unbind(0)
    return torch.stack([gate, up], dim=1).reshape(rows, k)


class CutlassGemm:
    """The built library at `path`; `names` lists the configurations it holds."""

    def __init__(self, path: str | Path):
        if not Path(path).is_file():  # CDLL("") would load the running program
            raise FileNotFoundError(f"no CUTLASS GEMM library at {str(path)!r}: build it with "
                                    "python -m tools.kernels.cutlass_gemm.build")
        self.lib = ctypes.CDLL(str(path))
        self.lib.vd_gemm_status_string.restype = ctypes.c_char_p
        self.lib.vd_gemm_status_string.argtypes = [ctypes.c_int]
        self.names = []
        for config in CONFIGS:
            try:
                run, workspace = getattr(self.lib, config.symbol), getattr(self.lib, config.symbol + "_workspace")
            except AttributeError:  # built with --configs: not every configuration is there
                continue
            run.restype, workspace.restype = ctypes.c_int, ctypes.c_long
            run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 4 + [ctypes.c_void_p, ctypes.c_size_t,
                                                                         ctypes.c_void_p]
            workspace.argtypes = [ctypes.c_int] * 4
            self.names.append(config.name)

    def _raise(self, name: str, status: int) -> None:
        raise CutlassError(f"{name}: {self.lib.vd_gemm_status_string(status).decode()}")

    def workspace_bytes(self, name: str, *, m: int, n: int, k: int, splits: int = 1) -> int:
        size = getattr(self.lib, BY_NAME[name].symbol + "_workspace")(m, n, k, splits)
        if size < 0:
            self._raise(name, -size)
        return size

    def linear(self, name: str, x: torch.Tensor, weight: torch.Tensor, *, out: torch.Tensor | None = None,
               splits: int = 1, workspace: torch.Tensor | None = None) -> torch.Tensor:
        """x @ weight.T as configuration `name` computes it, into out (allocated if None), on the current stream.

        splits > 1 cuts K into that many slices (stream-K configurations only); workspace is a CUDA byte tensor
        of at least workspace_bytes(...) (None: no workspace, enough for the data-parallel configurations).
        """
        check_operands(x, weight, out)
        return self._call(name, x, weight, out, n=weight.shape[0], swiglu=False, splits=splits, workspace=workspace)

    def swiglu(self, name: str, x: torch.Tensor, weight: torch.Tensor, *, out: torch.Tensor | None = None,
               workspace: torch.Tensor | None = None) -> torch.Tensor:
        """silu(gate) * up of x @ gate_up.T [M, I], weight = interleave_gate_up(gate_up) [2I, K], as kernels.swiglu
        rounds it; configuration `name` must be a SwiGLU one."""
        if weight.dim() != 2 or weight.shape[0] % (2 * INTERLEAVE):
            raise ValueError(f"weight [2I, K] with 2I a multiple of {2 * INTERLEAVE} wanted, got {tuple(weight.shape)}")
        n = weight.shape[0] // 2
        check_operands(x, weight[:n], out)
        return self._call(name, x, weight, out, n=n, swiglu=True, splits=1, workspace=workspace)

    def _call(self, name: str, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None, *, n: int,
              swiglu: bool, splits: int, workspace: torch.Tensor | None) -> torch.Tensor:
        if workspace is not None and (workspace.dtype != torch.uint8 or workspace.device != x.device):
            raise ValueError(f"workspace must be uint8 on {x.device}, got {workspace.dtype} on {workspace.device}")
        if name not in self.names:
            raise ValueError(f"{name} is not in this library ({', '.join(self.names)})")
        if BY_NAME[name].swiglu != swiglu:
            raise ValueError(f"{name} is {'' if BY_NAME[name].swiglu else 'not '}a SwiGLU configuration")
        m, k = x.shape
        out = torch.empty(m, n, dtype=torch.float16, device=x.device) if out is None else out
        ws_ptr, ws_bytes = (None, 0) if workspace is None else (workspace.data_ptr(), workspace.numel())
        stream = torch.cuda.current_stream(x.device).cuda_stream
        status = getattr(self.lib, BY_NAME[name].symbol)(x.data_ptr(), weight.data_ptr(), out.data_ptr(), m, n, k,
                                                         splits, ws_ptr, ws_bytes, stream)
        if status != 0:
            self._raise(name, status)
        return out
