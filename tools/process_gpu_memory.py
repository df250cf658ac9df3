"""The GPU memory a process holds, as the driver counts it (`nvidia-smi --query-compute-apps`): its CUDA context,
weights, CUDA-graph pools and PyTorch's cache, all of it. A PyTorch process never gives its cache back, so the value
read after some work is the most that process has held so far: its peak."""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def parse_compute_apps(text: str) -> dict[int, float]:
    """`pid, used MiB` lines (QUERY's output) as {pid: MiB}, summed over the GPUs a process uses; lines nvidia-smi
    cannot fill ("[N/A]", as under some containers) are left out."""
    used: dict[int, float] = {}
    for line in text.splitlines():
        pid, _, mib = (part.strip() for part in line.partition(","))
        if pid.isdigit() and mib.replace(".", "", 1).isdigit():
            used[int(pid)] = used.get(int(pid), 0.0) + float(mib)
    return used


def _nvidia_smi() -> str | None:
    if shutil.which(QUERY[0]) is None:
        return None
    done = subprocess.run(QUERY, capture_output=True, text=True, timeout=30)
    return done.stdout if done.returncode == 0 else None


def process_gpu_gib(pid: int, query: Callable[[], str | None] = _nvidia_smi) -> float | None:
    """GiB of GPU memory process `pid` holds now; None where nvidia-smi is missing or does not list it (no GPU)."""
    text = query()
    mib = parse_compute_apps(text).get(pid) if text is not None else None
    return None if mib is None else mib / 1024
