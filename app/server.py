"""Starts the app: folders, settings, the GPU worker and the model (loading in the background), then
the Gradio server with settings for a single-user desktop app (local only, nothing sent anywhere)."""
from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

from engine.constants import DEMO_MODEL
from engine.errors import StorageError
from engine.text.normalize import warm as warm_normalisation

from . import ASSETS
from .logs import configure_logging
from .storage import AppDirs

MAX_UPLOAD = "25mb"
QUEUE_SIZE = 16
PAGE_SCRIPTS = ("live_player.js", "stop.js", "dropdowns.js", "microphone.js", "accordions.js")  # in app/assets
DEFAULT_PORT = 7860  # `serve`'s port when none is given
READY_WAIT_S = 3600.0  # how long `serve` waits to say the model is ready (a first download takes minutes)

log = logging.getLogger(__name__)


def configure_environment(dirs: AppDirs) -> None:
    """Privacy switches and the upload folder; Gradio reads these at import time, so call this first."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # no version check or usage ping
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["GRADIO_TEMP_DIR"] = str(dirs.uploads)  # voice clips stay in our private (0o700) cache


def serve(model: str | None = None, mode: str | None = None, demo: bool = False, host: str = "127.0.0.1",
          port: int | None = None, open_browser: bool = True, api: bool = False, api_key: str | None = None,
          headless: bool = False) -> int:
    """Run the app until interrupted; returns the exit status.

    Parameters
    ----------
    model : checkpoint folder or hub id; None means $VOICEDESK_MODEL, else k2-fsa/OmniVoice
        (with `demo`, the tiny random checkpoint in tests/data).
    mode : "hifi", "realtime" or "eager"; None means the mode saved in the settings.
    demo : label everything as demo output (noise).
    host : address to listen on; anything but loopback prints a warning.
    port : None means the first free port from 7860.
    open_browser : open the page in the default browser once the server is up.
    api : serve the OpenAI-compatible API (docs/api.md) even if the setting is off.
    api_key : the key API clients (and, beyond loopback, the page) must send; required beyond loopback.
    headless : serve only the API, no UI (implies `api`).
    """
    configure_logging()
    try:
        dirs = AppDirs.default().create()
    except StorageError as err:  # e.g. a read-only or full disk: one line, not a traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    configure_environment(dirs)
    from .api.access import ApiAccess, bind_refusal
    from .listen import port_refusal
    from .settings import Settings

    settings, problems = Settings.check(dirs.settings_file)
    if problems:
        settings.save(dirs.settings_file)  # the defaults replace the bad values, so this is said once
    if mode is not None:
        settings.mode = mode
    access = ApiAccess(key=api_key or None, forced_on=api or headless)
    refusal = bind_refusal(host, access.key)
    if port is None and headless:
        port = DEFAULT_PORT
    refusal = refusal or (port_refusal(host, port, searches_without_port=not headless) if port is not None else None)
    if refusal:  # said before the slow imports below
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    import gradio as gr
    from starlette.middleware import Middleware

    from .api.answer_socket import answer_routes
    from .api.routes import api_routes
    from .context import AppContext
    from .disconnect import CancelOnDisconnect
    from .downloads import download_routes
    from .engine_host import EngineHost
    from .history import History
    from .library import VoiceLibrary
    from .live_route import live_routes
    from .page_key import key_middleware
    from .playback import probe
    from .security import LOOPBACK_HOSTS, guard_middleware
    from .ui.layout import build_app
    from .upload_guard import UploadStorageGuard
    from .worker import GpuWorker

    if demo and model is None:
        model = str(DEMO_MODEL)
    worker = GpuWorker()
    host_engine = EngineHost(worker, model)
    # Before the model loads: importing sounddevice points the terminal (fd 2) at /dev/null for a moment, and
    # a load that fails meanwhile would say so to nobody.
    speakers = probe()
    host_engine.start(settings.mode)
    if settings.speaks_numbers:  # its grammar loads in its own process meanwhile: the first text won't wait
        warm_normalisation(None if settings.language == "auto" else settings.language)
    ctx = AppContext(dirs=dirs, settings=settings, library=VoiceLibrary.open(dirs),
                     history=History(dirs.history, settings.history_max_entries, settings.history_max_mb * 2**20),
                     worker=worker, host=host_engine, speakers=speakers, demo=demo,
                     upload_root=Path(gr.utils.get_upload_folder()),
                     notices=[f"Settings: {p}." for p in problems], api=access, bind_host=host)
    routes = [*api_routes(ctx, access), *answer_routes(ctx, access)]
    # bind_refusal saw to the key; headless there is no page to guard (the API checks its own key)
    keyed = [key_middleware(access.key)] if host not in LOOPBACK_HOSTS and not headless else []
    middleware = [guard_middleware(host), *keyed, Middleware(CancelOnDisconnect, abandon=_abandoner(worker)),
                  Middleware(UploadStorageGuard, upload_dir=ctx.upload_root)]
    try:
        if headless:
            _say_when_ready(host_engine)
            _serve_headless(routes, middleware, host, port)
            return 0
        if host not in LOOPBACK_HOSTS:
            print(f"Listening on {host}: the page asks for the API key before anyone can use this app, your GPU "
                  "and your saved voices. The browser microphone only works on http://127.0.0.1 or localhost.",
                  file=sys.stderr)
        # Results are served from where they are stored, never copied into Gradio's cache: deleting deletes.
        gr.set_static_paths([ctx.history.audio_dir])
        blocks = build_app(ctx)
        _range_checks_in_one_line(gr, blocks)
        _, url, _ = blocks.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE).launch(
            server_name=host, server_port=port, inbrowser=open_browser, share=False, quiet=True,
            prevent_thread_lock=True,
            max_file_size=MAX_UPLOAD, strict_cors=True,
            allowed_paths=[str(ctx.history.audio_dir), str(dirs.exports)],  # the only folders served (Studio exports)
            blocked_paths=[str(dirs.config), str(dirs.voices)],
            enable_monitoring=False, mcp_server=False, run_history=False, pwa=False, ssr_mode=False,
            footer_links=["api"], show_error=True, favicon_path=str(ASSETS / "icon.svg"),
            theme=_theme(gr), css_paths=[ASSETS / "style.css"], head=_page_scripts(),
            app_kwargs={"middleware": middleware,
                        "routes": [*routes, *download_routes(ctx), *live_routes(ctx.live_audio)]},
            # Gradio's last step sends the page one HEAD with a 3 s limit and no retry after a timeout, then fails
            # the start with "When localhost is not accessible..." (3 of 11 starts on a loaded machine); launch has
            # already waited for the server's own startup request, so the server is known to answer.
            _frontend=False)
        print(f"VoiceDesk is running at {url}  (voices and history: {dirs.data}; Ctrl+C to quit)", flush=True)
        blocks.block_thread()
        return 0
    finally:
        worker.shutdown()


def _serve_headless(routes, middleware, host: str, port: int) -> None:
    """The API alone, no UI and no browser (`voicedesk serve`)."""
    import uvicorn
    from fastapi import FastAPI

    config = uvicorn.Config(FastAPI(routes=routes, middleware=middleware, docs_url=None, redoc_url=None,
                                    openapi_url=None), host=host, port=port, log_level="warning")
    print(f"VoiceDesk API is running at http://{host}:{port}/v1 (Ctrl+C to quit)", flush=True)
    uvicorn.Server(config).run()


def _say_when_ready(host_engine) -> None:
    """Headless there is no page to show the model's load: the terminal says when requests can be answered (they
    get 503 until then), or why none can, as the Wyoming server does."""
    def wait() -> None:
        state = host_engine.wait_ready(READY_WAIT_S)
        if state.ready:
            print(f"The model is ready: {state.message}", flush=True)
        else:
            print(f"error: the model could not be loaded: {state.message}", file=sys.stderr, flush=True)

    threading.Thread(target=wait, name="voicedesk-ready-line", daemon=True).start()


def _range_checks_in_one_line(gr, blocks) -> None:
    """Gradio checks a slider's or number's range itself and prints a traceback when an API client sends a
    value outside it: that is the client's mistake, so it gets one line in the terminal, like the others."""
    for block in blocks.blocks.values():
        if isinstance(block, (gr.Slider, gr.Number)):
            block.preprocess = _quiet(gr, block.preprocess, block.label)


def _quiet(gr, preprocess, label):
    def checked(payload):
        try:
            return preprocess(payload)
        except gr.Error as err:
            log.info("refused %s: %s", label, err.message)
            raise gr.Error(err.message, print_exception=False) from None

    return checked


def _abandoner(worker):
    def abandon(session: str) -> None:
        if worker.cancel(session, abandoned=True):
            log.info("a client went away: its generation was stopped")

    return abandon


def _page_scripts() -> str:
    """The page's own scripts, as document-level <script> tags (they listen from the first moment)."""
    return "".join(f"<script>{(ASSETS / name).read_text(encoding='utf-8')}</script>" for name in PAGE_SCRIPTS)


def _theme(gr):
    # Fonts ship with Gradio (LocalFont): nothing is fetched from the internet.
    theme = gr.themes.Soft(primary_hue="indigo", secondary_hue="violet", neutral_hue="slate",
                           font=[gr.themes.LocalFont("IBM Plex Sans"), "ui-sans-serif", "system-ui", "sans-serif"])
    return theme.set(block_title_background_fill="transparent", block_title_text_color="*neutral_700",
                     block_title_padding="0", block_label_background_fill="transparent",
                     block_label_text_color="*neutral_600", block_label_text_size="*text_sm",
                     block_title_text_size="*text_sm", button_large_radius="*radius_lg")
