"""Owns the Engine: loads it on the GPU worker in the background, reports progress, warms it up,
and reloads it when the user switches quality mode. The UI asks `state()` and enables Generate
once it says ready."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.config import GenerationConfig, Mode
from engine.errors import GpuMemoryError, VoiceDeskError
from engine.lm.modes import pick_device, runs_as

from .realtime_check import RealtimeChecks
from .worker import GpuWorker

log = logging.getLogger(__name__)

WARMUP_TEXT = "Warming up."
CHECK_SETUP = ("The terminal shows the details; `python launcher.py doctor` checks the GPU, the driver and the "
               "model files.")


@dataclass(frozen=True)
class HostState:
    stage: str  # download | load | codec | quantize | capture | warmup | ready | failed
    fraction: float
    message: str

    @property
    def ready(self) -> bool:
        return self.stage == "ready"

    @property
    def failed(self) -> bool:
        return self.stage == "failed"


class EngineHost:
    def __init__(self, worker: GpuWorker, model: str | None, device: str = "auto",
                 loader: Callable | None = None, realtime_check: RealtimeChecks | None = None):
        if loader is None:
            from engine.engine import Engine

            loader = Engine.load
        self.worker, self.model, self.device, self._loader = worker, model, device, loader
        # Realtime against High fidelity, once per checkpoint and backend (docs/realtime_check.md)
        self.realtime_check = realtime_check or RealtimeChecks(worker, loader)
        self._engine = None
        self._state = HostState("load", 0.0, "Starting")
        self._lock = threading.Lock()

    @property
    def engine(self):
        """The loaded Engine; raises a readable error while it is not ready."""
        with self._lock:
            engine, state = self._engine, self._state
        if engine is None or not state.ready:
            if state.failed:
                raise VoiceDeskError(f"The model could not be loaded: {state.message}")
            raise VoiceDeskError(f"The model is still loading ({state.message}, {state.fraction:.0%}). "
                                 "Try again in a moment.")
        return engine

    def state(self) -> HostState:
        with self._lock:
            return self._state

    def modes_differ(self) -> bool:
        """Whether the quality modes run different paths here (not on a CPU: every mode is the eager path)."""
        device = pick_device(self.device)
        return runs_as(Mode.HIFI, device) is not runs_as(Mode.REALTIME, device)

    def start(self, mode: Mode | str) -> bool:
        """Load (or reload) the model in `mode` on the worker; returns at once. Returns False, loading
        nothing, when the loaded model already runs the path `mode` takes on this device."""
        with self._lock:
            loaded = self._engine if self._state.ready else None
        if loaded is not None and mode in set(Mode):
            if runs_as(Mode(mode), loaded.device) is runs_as(loaded.mode, loaded.device):
                loaded.mode = Mode(mode)  # the chosen mode, on the path the loaded model already runs
                return False
        self._set("load", 0.0, "Waiting for the GPU")
        self.worker.submit(lambda cancel: self._load(mode))
        return True

    def wait_ready(self, timeout: float) -> HostState:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            if state.ready or state.failed:
                return state
            time.sleep(0.05)
        return self.state()

    def _load(self, mode: Mode | str) -> None:
        """Runs on the worker: every failure ends as the "failed" state (the page shows it) and a log
        line (the terminal), never as an exception nobody reads."""
        with self._lock:
            self._engine = None  # free the old model's memory before the new one arrives
        self.realtime_check.reset()
        try:
            try:
                mode = Mode(mode)
            except ValueError:
                raise VoiceDeskError(f"Unknown quality mode '{mode}': choose one of "
                                     f"{', '.join(m.value for m in Mode)}.") from None
            engine = self._loader(self.model, device=self.device, mode=mode,
                                  progress=self._on_progress)
            self._set("warmup", 0.0, "Warming up (first generation)")
            engine.synthesize(WARMUP_TEXT, config=GenerationConfig(num_step=4, seed=0))  # kernels, allocator
        except (VoiceDeskError, torch.cuda.OutOfMemoryError) as err:
            if isinstance(err, torch.cuda.OutOfMemoryError):
                err = GpuMemoryError.from_torch(err, doing="while loading the model")
            log.error("The model could not be loaded: %s", err)
            self._set("failed", 0.0, str(err))
            return
        except Exception as err:  # anything else is a bug or a driver problem: log it in full, keep serving
            log.exception("loading the model failed")
            self._set("failed", 0.0, f"{type(err).__name__}: {err}. {CHECK_SETUP}")
            return
        self.realtime_check.after_load(engine)  # before "ready", so a page that sees ready sees the check too
        with self._lock:
            self._engine = engine
            self._state = HostState("ready", 1.0, engine.backend)

    def _on_progress(self, progress) -> None:
        if progress.stage != "ready":  # ready only after the warm-up below
            self._set(progress.stage, progress.fraction, progress.message)

    def _set(self, stage: str, fraction: float, message: str) -> None:
        with self._lock:
            self._state = HostState(stage, float(fraction), message)
