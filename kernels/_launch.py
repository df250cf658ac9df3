"""What every kernel wrapper does before a launch: check arguments, allocate or check outputs."""
import contextlib

import torch

from kernels._triton import HAS_TRITON, INTERPRET

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def device_of(*tensors: torch.Tensor) -> torch.device:
    """The one device all tensors share, if a Triton kernel can run there."""
    if not HAS_TRITON:
        raise RuntimeError("Triton is not installed: use the *_ref functions instead")
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise ValueError(f"tensors are on different devices: {sorted(map(str, devices))}")
    device = devices.pop()
    if device.type != "cuda" and not INTERPRET:
        raise ValueError(f"Triton kernels need CUDA tensors, got {device} "
                         "(set TRITON_INTERPRET=1 before importing kernels to run them on the CPU)")
    return device


def check(name: str, t: torch.Tensor, shape: tuple[int, ...], dtypes: tuple[torch.dtype, ...]) -> None:
    """Raise unless t has this shape, one of these dtypes and a contiguous last dimension."""
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name}: expected dtype in {[str(d) for d in dtypes]}, got {t.dtype}")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous, got strides {t.stride()}")


def output(name: str, out: torch.Tensor | None, shape: tuple[int, ...], dtype: torch.dtype,
           device: torch.device) -> torch.Tensor:
    """`out` after checking it can take the result, or a new tensor when it is None."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    check(name, out, shape, (dtype,))
    if out.device != device:
        raise ValueError(f"{name}: expected device {device}, got {out.device}")
    return out


def on_device(device: torch.device):
    """Launch context: Triton launches on the current CUDA device, which must be the tensors'."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def num_warps(block: int) -> int:
    """Warps for a program handling `block` elements: about 8 elements per thread, 1..16 warps."""
    return min(max(block // 256, 1), 16)
