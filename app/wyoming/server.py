"""`voicedesk serve --wyoming`: the Wyoming server alone (no page, no HTTP API), on the app's folders, settings,
voice library and one GPU worker. It listens at once (`describe` works while the model loads) and says when the
model is ready."""
from __future__ import annotations

import asyncio
import logging
import sys
from functools import partial

from engine.checks.budget import DEFAULT_BUDGET_MS, MAX_BUDGET_MS
from engine.constants import DEMO_MODEL
from engine.errors import StorageError
from engine.text.normalize import warm as warm_normalisation

from ..logs import configure_logging
from ..security import LOOPBACK_HOSTS
from ..settings import MAX_PICKED_SEED
from ..storage import AppDirs

DEFAULT_PORT = 10200  # Wyoming's usual text-to-speech port (Home Assistant suggests it)
READY_WAIT_S = 3600.0

log = logging.getLogger(__name__)


def serve_wyoming(model: str | None = None, mode: str | None = None, demo: bool = False, host: str = "127.0.0.1",
                  port: int | None = None, seed: int | None = None, check_budget_ms: int = DEFAULT_BUDGET_MS) -> int:
    """Run until interrupted; returns the exit status. `seed`: every answer seeded from it (the same text, the
    same audio); None draws one per answer. `check_budget_ms`: what the app's take checks may add to a streamed
    clause (0: no checks)."""
    if not 0 <= check_budget_ms <= MAX_BUDGET_MS:
        print(f"error: --check-budget-ms must be from 0 to {MAX_BUDGET_MS}", file=sys.stderr)
        return 2
    if seed is not None and not 0 <= seed <= MAX_PICKED_SEED:  # the API's bound: a seed a person picks
        print(f"error: --seed must be from 0 to {MAX_PICKED_SEED}", file=sys.stderr)
        return 2
    configure_logging()
    port = DEFAULT_PORT if port is None else port
    try:
        dirs = AppDirs.default().create()
    except StorageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from ..listen import port_refusal
    from ..settings import Settings

    refusal = port_refusal(host, port)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    settings = Settings.load(dirs.settings_file)
    if mode is not None:
        settings.mode = mode
    if demo and model is None:
        model = str(DEMO_MODEL)
    from ..context import AppContext
    from ..engine_host import EngineHost
    from ..history import History
    from ..library import VoiceLibrary
    from ..playback import SpeakerStatus
    from ..worker import GpuWorker
    from .handler import WyomingService

    worker = GpuWorker()
    engine_host = EngineHost(worker, model)
    engine_host.start(settings.mode)
    if settings.speaks_numbers:  # its grammar loads in its own process meanwhile: the first text won't wait
        warm_normalisation(None if settings.language == "auto" else settings.language)
    ctx = AppContext(dirs=dirs, settings=settings, library=VoiceLibrary.open(dirs),
                     history=History(dirs.history, settings.history_max_entries, settings.history_max_mb * 2**20),
                     worker=worker, host=engine_host, speakers=SpeakerStatus(False, "Wyoming clients play the audio."),
                     demo=demo, upload_root=dirs.uploads, bind_host=host)
    if host not in LOOPBACK_HOSTS:
        print(f"Listening on {host}: Wyoming has no keys, so anyone who can reach this port can use your GPU and "
              "speak in your saved voices. Listen only on an address your assistant's network has.", file=sys.stderr)
    service = WyomingService(ctx, version=_version(), seed=seed, check_budget_ms=check_budget_ms)
    try:
        asyncio.run(_serve(service, host, port))
    except KeyboardInterrupt:
        pass
    finally:
        worker.shutdown()
    return 0


async def _serve(service, host: str, port: int) -> None:
    from wyoming.server import AsyncTcpServer

    from .handler import AnswerHandler

    server = AsyncTcpServer(host, port)
    await server.start(partial(AnswerHandler, service=service))
    print(f"VoiceDesk Wyoming server at tcp://{host}:{port} (Ctrl+C to quit); the model is loading", flush=True)
    state = await asyncio.to_thread(service.ctx.host.wait_ready, READY_WAIT_S)
    if state.ready:
        print(f"The model is ready: {state.message}", flush=True)
        print(checks_line(service), flush=True)
    else:
        print(f"error: the model could not be loaded: {state.message}", file=sys.stderr, flush=True)
    await asyncio.Event().wait()  # serve until interrupted


def checks_line(service) -> str:
    """What the take checks of streamed answers are here: off, or their mode within the budget, and the checks
    whose models are not on this computer."""
    from ..checks import policy_from

    mode = policy_from(service.ctx.settings).mode.value
    if mode == "off" or not service.check_budget_ms:
        return "Take checks of streamed answers: off" + ("" if mode == "off" else " (--check-budget-ms 0)")
    off = ", ".join(f"{name} (its model {model.repo_id} is not on this computer)"
                    for name, model in service.ctx.checks.missing().items())
    return f"Take checks of streamed answers: {mode}, within {service.check_budget_ms} ms a clause" + \
        (f"; off here: {off}" if off else "")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("voicedesk")
    except PackageNotFoundError:
        return "unknown"
