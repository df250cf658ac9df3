"""Finding a CUDA library that PyTorch's CUDA wheels ship (NVRTC, cuBLASLt) without a CUDA toolkit."""
import ctypes
import glob
import os
import sys
from pathlib import Path

import torch


def library_candidates(*, env_var: str, linux_name: str, windows_pattern: str,
                       skip: tuple[str, ...] = ()) -> list[str]:
    """Where a library may be, best first: the path in $env_var, the loader's search path (the name for
    torch.version.cuda's major first, which finds the copy PyTorch has loaded), then pip's nvidia packages.

    linux_name is the file name without `.so` (`libnvrtc`); windows_pattern a glob (`nvrtc64_*.dll`); files
    the globs find whose path contains one of `skip` are left out (other builds that match the glob).
    """
    def matches(pattern: str) -> list[str]:
        return sorted(p for p in glob.glob(pattern, recursive=True) if not any(part in p for part in skip))

    found = [os.environ[env_var]] if os.environ.get(env_var) else []
    if sys.platform == "win32":
        found += matches(os.path.join(Path(torch.__file__).parent, "lib", windows_pattern))[::-1]
        patterns = [os.path.join("nvidia", "**", "bin", windows_pattern)]
    else:
        major = (torch.version.cuda or "12").split(".")[0]
        found += [f"{linux_name}.so.{major}", f"{linux_name}.so"]
        patterns = [os.path.join("nvidia", "**", "lib", f"{linux_name}.so*")]
    for root in sys.path:
        for pattern in patterns:
            found += matches(os.path.join(root, pattern))
    return found


def load_first(candidates: list[str], *, what: str, env_var: str) -> ctypes.CDLL:
    """The first of candidates that loads; a RuntimeError naming what is missing otherwise."""
    errors = []
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError as e:
            errors.append(str(e))
    raise RuntimeError(f"{what} was not found; install PyTorch's CUDA build or set {env_var} to the library's "
                       "path. Tried: " + "; ".join(errors[-3:]))
