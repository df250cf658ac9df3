"""Realtime checks itself where the real weights are (docs/realtime_check.md). The first time Realtime is loaded
with a real checkpoint on a GPU, one job on the GPU worker renders the check sentence in Realtime and in High
fidelity and compares them (engine/checks/realtime.py); the page shows the state of it beside the quality
switch. The result is kept in the app's cache under a key of the checkpoint, the backend and the quantization
recipe: the check runs again only when one of them changes. `voicedesk doctor` shows the stored result."""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from engine.checks.realtime import RealtimeCheck, SpeakerSource, check_realtime
from engine.checks.voice import SpeakerEncoder
from engine.config import Mode
from engine.errors import StorageError
from engine.folders import user_folders

from .checks import models
from .storage import atomic_write_json, read_json
from .worker import GpuWorker

log = logging.getLogger(__name__)

OFF, WAITING, RUNNING, DONE, FAILED = "off", "waiting", "running", "done", "failed"


def results_folder() -> Path:
    """Where the results are kept: the app's cache (VOICEDESK_HOME moves it), one file per key."""
    return user_folders().cache / "realtime_check"


def why_not_checked(*, mode: Mode, device_type: str, demo: bool) -> str | None:
    """Why the check does not run for a model loaded in `mode` on a `device_type` device; None: it runs."""
    if mode is not Mode.REALTIME:
        return "only Realtime is checked"
    if device_type != "cuda":
        return "no NVIDIA GPU: Realtime runs the same path as High fidelity"
    if demo:
        return "the demo model's output is noise"
    return None


def gate(engine) -> str | None:
    return why_not_checked(mode=engine.mode, device_type=engine.device.type, demo=engine.is_demo)


def local_speaker(device) -> SpeakerSource:
    """The voice check's speaker model when it is on this computer (the take checks' own: app/checks.py)."""
    def load() -> tuple[SpeakerEncoder | None, str | None]:
        folder = models()["voice"].local_folder()
        if folder is None:
            return None, f"the speaker model ({models()['voice'].repo_id}) is not on this computer"
        return SpeakerEncoder(folder, device), None

    return load


@dataclass(frozen=True)
class CheckKey:
    """What a result holds for: the weights, what runs Realtime (scheme and GPU) and how it was quantized."""

    checkpoint: str  # names, sizes and times of the weight files (engine/quant/realtime.py)
    backend: str  # e.g. "W4A4 INT4-MMA (NVIDIA L4, sm_89)"
    recipe: str  # the realtime QuantConfig, as in the name of the cached conversion

    @classmethod
    def of(cls, engine) -> CheckKey:
        from engine.quant.realtime import checkpoint_fingerprint, realtime_config

        return cls(checkpoint_fingerprint(engine.folder), engine.backend, realtime_config(engine.device).to_json())

    def file(self, folder: Path) -> Path:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:24]
        return folder / f"{digest}.json"


@dataclass(frozen=True)
class CheckStatus:
    state: str  # off | waiting | running | done | failed
    message: str = ""  # off: why it does not run; waiting/running: what it does; failed: why
    result: RealtimeCheck | None = None

    @property
    def busy(self) -> bool:
        return self.state in (WAITING, RUNNING)

    def line(self) -> str:
        """The sentence beside the quality switch; empty when the check does not apply."""
        if self.state == OFF:
            return ""
        if self.busy:
            return f"Checking Realtime against High fidelity on this GPU (once for this model): {self.message}"
        if self.state == FAILED:
            return f"Realtime could not be checked on this GPU: {self.message}"
        if self.result.verdict == "fine":
            return f"Realtime checked on this GPU: {self.result.summary()}"
        return (f"Realtime drifts from High fidelity on this GPU: {self.result.limits_crossed()}. "
                "Choose High fidelity for the best quality.")


class RealtimeChecks:
    """Runs the check once per key on the worker and keeps its results in `folder`.

    `loader` is Engine.load's signature (it loads High fidelity for the comparison); `speaker(device)`
    gives the speaker model source; `gate(engine)` says why a loaded engine is not checked (None: it is)."""

    def __init__(self, worker: GpuWorker, loader: Callable, folder: Path | None = None,
                 speaker: Callable[[object], SpeakerSource] = local_speaker,
                 gate: Callable[[object], str | None] = gate):
        self._worker, self._loader, self._speaker, self._gate = worker, loader, speaker, gate
        self.folder = folder or results_folder()
        self._status = CheckStatus(OFF)
        self._loads = 0  # counts loads: a queued check of an earlier load is dropped
        self._lock = threading.Lock()

    def status(self) -> CheckStatus:
        with self._lock:
            return self._status

    def reset(self) -> None:
        """A model is being (re)loaded: nothing is checked until it is."""
        self._set(CheckStatus(OFF, "loading"), new_load=True)

    def after_load(self, engine) -> None:
        """Called on the worker once `engine` is loaded: show the stored result for it, or queue the check
        (it runs after the jobs already waiting). Never raises: a check that cannot start says why."""
        why = self._gate(engine)
        if why is not None:
            self._set(CheckStatus(OFF, why), new_load=True)
            return
        try:
            key = CheckKey.of(engine)
            stored = self.stored(key)
        except Exception as err:  # e.g. the weight files went away: the check is not worth failing the load for
            log.exception("the Realtime check could not start")
            self._set(CheckStatus(FAILED, f"{type(err).__name__}: {err}"), new_load=True)
            return
        if stored is not None:
            self._set(CheckStatus(DONE, result=stored), new_load=True)
            return
        load = self._set(CheckStatus(WAITING, "waiting for the GPU"), new_load=True)
        # a weak reference: a model replaced before the check starts is freed, not kept for it
        self._worker.submit(lambda cancel, engine=weakref.ref(engine): self._run(engine(), key, load, cancel))

    def stored(self, key: CheckKey) -> RealtimeCheck | None:
        """The kept result for `key`, or None."""
        path = key.file(self.folder)
        record = read_json(path) if path.is_file() else None
        if record is None or record.get("key") != asdict(key) or "failed" in record:  # a failure: check again
            return None
        try:
            return RealtimeCheck.from_dict(record["result"])
        except (KeyError, TypeError, ValueError):
            log.warning("ignoring %s: not a Realtime check result", path)
            return None

    def _run(self, engine, key: CheckKey, load: int, cancel) -> None:
        with self._lock:
            if load != self._loads:  # another model was loaded meanwhile: it is checked instead
                return
        if engine is None:
            self._set(CheckStatus(OFF, "the model was unloaded"))
            return

        def report(message: str) -> None:
            self._set(CheckStatus(RUNNING, message))

        def load_hifi():
            return self._loader(engine.folder, device=engine.device, mode=Mode.HIFI,
                                progress=lambda p: report(f"loading High fidelity: {p.message}"))

        try:
            result = check_realtime(engine, load_hifi, self._speaker(engine.device), report=report, cancel=cancel)
        except Exception as err:  # out of GPU memory, stopped at shutdown...: said, and tried at the next load
            log.warning("the Realtime check did not finish: %s: %s", type(err).__name__, err)
            self._set(CheckStatus(FAILED, f"{type(err).__name__}: {err}"))
            return
        log.info("Realtime check (%s): %s", key.backend, result.summary())
        try:
            self.keep(key, result)
        except (OSError, StorageError) as err:  # shown all the same; only not kept for the next start
            log.warning("the Realtime check's result cannot be kept: %s", err)
        except Exception as err:  # a fault of ours (a value JSON cannot hold...): failed, never left "running"
            log.exception("the Realtime check's result could not be kept")
            why = f"its result could not be kept ({type(err).__name__}: {err})"
            self.keep_failure(key, why)  # noted before it is shown: whoever sees the failure finds the note
            self._set(CheckStatus(FAILED, why))
            return
        self._set(CheckStatus(DONE, result=result))

    def keep(self, key: CheckKey, result: RealtimeCheck) -> None:
        """Store `result` for `key` (atomically: a crash leaves the old file or the new one)."""
        self._write(key, {"result": result.to_dict()})

    def keep_failure(self, key: CheckKey, why: str) -> None:
        """Note for `voicedesk doctor` that the check for `key` failed and why; the next load checks again.
        Never raises: the failure is shown on the page and logged whether or not this note is kept."""
        try:
            self._write(key, {"failed": why})
        except Exception as err:
            log.warning("the Realtime check's failure cannot be noted for doctor: %s", err)

    def _write(self, key: CheckKey, fields: dict) -> None:
        record = {"key": asdict(key), "checked": datetime.now(timezone.utc).isoformat(), **fields}
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(key.file(self.folder), record)

    def _set(self, status: CheckStatus, new_load: bool = False) -> int:
        """Show `status`; `new_load`: for a model loaded since the last; returns the load it is for."""
        with self._lock:
            self._loads += new_load
            self._status = status
            return self._loads


def latest_for(checkpoint: str, device: str,
               folder: Path | None = None) -> tuple[RealtimeCheck | None, dict] | None:
    """The newest kept result for weights `checkpoint` on `device` (the device label that ends the backend
    name, e.g. "NVIDIA L4, sm_89"), with its record; None when there is none. A check that failed (its record
    says why under "failed") comes as (None, record)."""
    found = []
    for path in sorted((folder or results_folder()).glob("*.json")):
        record = read_json(path)
        key = (record or {}).get("key") or {}
        if key.get("checkpoint") == checkpoint and str(key.get("backend", "")).endswith(f"({device})"):
            try:
                result = None if "failed" in record else RealtimeCheck.from_dict(record["result"])
                found.append((record.get("checked", ""), result, record))
            except (KeyError, TypeError, ValueError):
                log.warning("ignoring %s: not a Realtime check result", path)
    if not found:
        return None
    _, result, record = max(found, key=lambda item: item[0])
    return result, record
