"""cuBLASLt algorithms chosen per shape for the LM's fp16 projections inside the CUDA graphs (issue 22 targets 1-3).

At a short output's rows (256-384) the algorithm cuBLAS runs first leaves most of an H200 idle for the N = 1024
projections, and cuBLASLt's heuristic lists faster ones after it (smaller tiles: o_proj 0.87-0.92x at 256-384
rows, gate_up 0.85x at 320, qkv 0.87x at 896; `tools/kernels/bench_cublaslt.py`). For each bucket the runner
captures, `TunedGemms.prepare(rows)` measures once per machine the candidates of `kernels.cublaslt` for every
projection shape against torch.mm: each must land within fp16 rounding of float64 (split-K reductions that round
partial sums to fp16 are never taken) and is timed over the model's own weights, replayed from a CUDA graph; it
replaces torch.mm only when faster by more than `cublaslt.TIE`. Choices are kept in the user cache, one file per
(GPU, driver, cuBLASLt version). `LtLinear`, swapped in for the blocks' fp16 nn.Linear by `use_tuned_gemms`,
runs the chosen algorithm for its rows and F.linear otherwise (the eager path, shapes without a choice).

Off unless VOICEDESK_GEMMS=tuned (until measured end to end).
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from kernels import cublaslt
from kernels.numerics import fp16_rounding_ratio

log = logging.getLogger(__name__)

ENV = "VOICEDESK_GEMMS"  # "torch" (cuBLAS's own choice, the default) or "tuned"
MAX_ROWS = 1024  # buckets tuned: up to here (the bench's gains are at 128-896 rows; tuning time grows with each)
FINALISTS = 3  # candidates timed again, with more replays, after the first timing
PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


class LtLinear(nn.Linear):
    """nn.Linear whose 2-D product runs the algorithm `gemms` chose for its rows, when there is one."""

    gemms: TunedGemms | None = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, gemms: TunedGemms) -> LtLinear:
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.weight, new.bias = linear.weight, None  # the same Parameter: no copy
        new.gemms = gemms
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # [M, K]
        y = None if self.gemms is None else self.gemms.run(rows, self.weight)
        return F.linear(x, self.weight) if y is None else y.view(*x.shape[:-1], self.out_features)


def use_tuned_gemms(lm: nn.Module, gemms: TunedGemms) -> list[LtLinear]:
    """Swap the blocks' fp16 projections without bias (not FP8 or W4A4 ones) for LtLinear; return them."""
    swapped = []
    for block in lm.layers:
        for parent in (block.attn, block.mlp):
            for name in PROJECTIONS:
                linear = getattr(parent, name, None)
                if type(linear) is nn.Linear and linear.bias is None and linear.weight.dtype == torch.float16:
                    setattr(parent, name, LtLinear.from_linear(linear, gemms))
                    swapped.append(getattr(parent, name))
    gemms.weights = _weights_by_shape(swapped)
    return swapped


def _weights_by_shape(linears: Sequence[nn.Linear]) -> dict[tuple[int, int], list[torch.Tensor]]:
    """(N, K) -> the weights of that shape, the first 8 (what a forward cycles through, more than L2 holds)."""
    found: dict[tuple[int, int], list[torch.Tensor]] = {}
    for linear in linears:
        found.setdefault(tuple(linear.weight.shape), []).append(linear.weight)
    return {shape: weights[:8] for shape, weights in found.items()}


def decide(trials: Sequence[cublaslt.Trial], torch_us: float, tie: float = cublaslt.TIE) -> cublaslt.Trial | None:
    """The trial to run instead of torch.mm, or None: `cublaslt.choose`'s pick, if it is correct, does not round
    split-K partials to fp16 and beats torch.mm by more than `tie`."""
    allowed = [t for t in trials if not (t.candidate.config.splitk > 1
                                         and t.candidate.config.reduction in cublaslt.ROUNDING_REDUCTIONS)]
    best = cublaslt.choose(allowed, tie)
    return best if best is not None and best.us * (1 + tie) < torch_us else None


def cache_name(gpu: str, driver: int, version: int) -> str:
    """The choices file of one (GPU, driver, cuBLASLt version): algorithms are valid within one version."""
    return f"gemms-{re.sub(r'[^A-Za-z0-9]+', '-', gpu).strip('-')}-driver{driver}-cublaslt{version}.json"


def driver_version() -> int:
    """The CUDA driver's version (e.g. 13000), 0 where it cannot be read."""
    try:
        lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        version = ctypes.c_int()
        return version.value if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 else 0
    except OSError:
        return 0


class TunedGemms:
    """The chosen algorithm per (rows, N, K), measured once per machine and kept in `cache_file`.

    Parameters
    ----------
    device : torch.device
        The CUDA device the LM runs on.
    cache_file : Path, optional
        Where choices are read and written (JSON); None measures every time.
    write : callable, optional
        write(path, text), atomically; needed with cache_file.
    """

    def __init__(self, device: torch.device, cache_file: Path | None = None,
                 write: Callable[[Path, str], None] | None = None):
        self.device, self.cache_file, self.write = device, cache_file, write
        self.weights: dict[tuple[int, int], list[torch.Tensor]] = {}  # set by use_tuned_gemms
        self.plans: dict[tuple[int, int, int], tuple[cublaslt.LtMatmul, cublaslt.Candidate]] = {}
        self.choices: dict[str, dict] = {}
        if cache_file is not None and cache_file.exists():
            try:
                self.choices = json.loads(cache_file.read_text())
            except (OSError, ValueError):
                log.warning("ignoring an unreadable GEMM choices file %s", cache_file)

    def run(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor | None:
        """x [M, K] @ weight[N, K]^T with the chosen algorithm, or None where there is none for this call."""
        plan = self.plans.get((x.shape[0], *weight.shape))
        if plan is None or not x.is_contiguous() or x.data_ptr() % cublaslt.ALIGNMENT:
            return None
        lt, candidate = plan
        return lt(x, weight, candidate)

    def prepare(self, rows: int) -> None:
        """Choose (from the cache or by measuring) the algorithm of every projection shape at `rows` rows."""
        if rows > MAX_ROWS:
            return
        changed = False
        for (n, k), weights in self.weights.items():
            key = f"{rows}x{n}x{k}"
            if (rows, n, k) in self.plans or self.choices.get(key, {}).get("algo", "") is None:
                continue  # chosen already (this bucket captured before), or torch.mm's
            lt = cublaslt.LtMatmul(rows, n, k, device=self.device)
            entry = self.choices.get(key)
            candidate = None if entry is None or entry["algo"] is None else lt.accept(bytes.fromhex(entry["algo"]),
                                                                                      entry["source"])
            if entry is None or (entry["algo"] is not None and candidate is None):
                entry, candidate = self._measure(lt, weights)
                self.choices[key], changed = entry, True
            if candidate is not None:
                self.plans[(rows, n, k)] = (lt, candidate)
        if changed and self.cache_file is not None:
            self.write(self.cache_file, json.dumps(self.choices, indent=1, sort_keys=True))

    def _measure(self, lt: cublaslt.LtMatmul, weights: list[torch.Tensor]) -> tuple[dict, cublaslt.Candidate | None]:
        m, n, k = lt.m, lt.n, lt.k
        with torch.inference_mode():
            x = torch.randn(m, k, device=self.device, generator=torch.Generator(self.device).manual_seed(m)).half()
            exact = x.double() @ weights[0].double().t()
            ref32, ref16 = exact.float(), exact.half()
            out = torch.empty(m, n, dtype=torch.float16, device=self.device)
            torch_us = _graph_us(lambda i: torch.mm(x, weights[i].t(), out=out), len(weights))
            trials = []
            for candidate in lt.candidates(splits=()):
                lt(x, weights[0], candidate, out=out)
                if fp16_rounding_ratio(out, ref32, ref16) <= 1:
                    us = _graph_us(lambda i, c=candidate: lt(x, weights[i], c, out=out), len(weights))
                    trials.append(cublaslt.Trial(candidate, True, us))
            finalists = sorted(trials, key=lambda t: t.us)[:FINALISTS]
            again = [cublaslt.Trial(t.candidate, True, _graph_us(lambda i, c=t.candidate: lt(x, weights[i], c, out=out),
                                                                 len(weights), replays=20)) for t in finalists]
            torch_us = min(torch_us, _graph_us(lambda i: torch.mm(x, weights[i].t(), out=out), len(weights),
                                               replays=20))
        chosen = decide(again, torch_us)
        entry = {"algo": None if chosen is None else chosen.candidate.algo.hex(), "torch_us": round(torch_us, 3),
                 "source": "torch.mm" if chosen is None else chosen.candidate.source,
                 "us": round(torch_us if chosen is None else chosen.us, 3)}
        log.info("GEMM %dx%dx%d: %s %.2f us (torch.mm %.2f)", m, n, k, entry["source"], entry["us"], torch_us)
        return entry, None if chosen is None else chosen.candidate


def _graph_us(fn: Callable[[int], object], copies: int, replays: int = 5) -> float:
    """Median us per call of fn(0), ..., fn(copies - 1) captured twice over in one CUDA graph, over `replays`."""
    fn(0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for i in range(2 * copies):
            fn(i % copies)
    graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / (2 * copies))
    return statistics.median(times)


def tuned_gemms_for(lm: nn.Module, device: torch.device, cache_folder: Path,
                    write: Callable[[Path, str], None]) -> TunedGemms | None:
    """TunedGemms swapped into `lm` when VOICEDESK_GEMMS=tuned and cuBLASLt runs here; None otherwise."""
    choice = os.environ.get(ENV, "torch").strip().lower() or "torch"
    if choice not in ("torch", "tuned"):
        raise ValueError(f"{ENV}={choice!r}: choose torch or tuned")
    if choice == "torch" or device.type != "cuda":
        return None
    reason = cublaslt.unavailable_reason()
    if reason is not None:
        log.warning("%s=tuned, but cuBLASLt is not available (%s): torch.mm runs the GEMMs", ENV, reason)
        return None
    name = cache_name(torch.cuda.get_device_name(device), driver_version(), cublaslt.version())
    gemms = TunedGemms(device, cache_folder / name, write)
    use_tuned_gemms(lm, gemms)
    return gemms
