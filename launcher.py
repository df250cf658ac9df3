"""VoiceDesk launcher: `voicedesk [command] ...` (or `python launcher.py ...`); `--help` lists the commands.

Builds things and injects them; heavy imports happen only inside the chosen command."""
from __future__ import annotations

import argparse
import os
import sys

from engine.checks.budget import DEFAULT_BUDGET_MS
from engine.config import DEFAULT_MODE, MODE_NAMES
from engine.constants import DEMO_MODEL


def _model_args(p: argparse.ArgumentParser, modes=MODE_NAMES, default_mode: str | None = DEFAULT_MODE.value,
                device: bool = True) -> None:
    p.add_argument("--model", help="checkpoint folder or hub id (default: $VOICEDESK_MODEL, else k2-fsa/OmniVoice)")
    p.add_argument("--demo", action="store_true", help="use the tiny random checkpoint (output is noise)")
    p.add_argument("--mode", default=default_mode, choices=modes,
                   help="quality mode" + (f" (default {default_mode})" if default_mode
                                          else " (default: the last one used)"))
    if device:
        p.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")


def _normalize_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--normalize-text", action="store_true",
                   help="speak numbers, dates and currency as words (needs voicedesk[tn] for en/zh)")


def _api_key_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api-key", help="key API clients must send as 'Authorization: Bearer <key>' (default: "
                                     "$VOICEDESK_API_KEY); required beyond 127.0.0.1, where the page asks for it too")


def _api_key(args) -> str | None:
    return os.environ.get("VOICEDESK_API_KEY") if args.api_key is None else args.api_key


def _model(args) -> str | None:
    return str(DEMO_MODEL) if args.demo else args.model


def cmd_ui(args) -> int:
    from app.server import serve  # it warns itself when the host is not loopback

    return serve(model=_model(args), mode=args.mode, demo=args.demo, host=args.host, port=args.port,
                 open_browser=not args.no_browser, api=args.api, api_key=_api_key(args))


def cmd_serve(args) -> int:
    misplaced = _misplaced_serve_options(args)
    if misplaced:
        print(f"error: {misplaced}", file=sys.stderr)
        return 2
    if args.wyoming:
        from app.wyoming.server import serve_wyoming

        budget = DEFAULT_BUDGET_MS if args.check_budget_ms is None else args.check_budget_ms
        return serve_wyoming(model=_model(args), mode=args.mode, demo=args.demo, host=args.host, port=args.port,
                             seed=args.seed, check_budget_ms=budget)
    from app.server import serve

    try:
        return serve(model=_model(args), mode=args.mode, demo=args.demo, host=args.host, port=args.port,
                     open_browser=False, api_key=_api_key(args), headless=True)
    except KeyboardInterrupt:  # Ctrl+C, raised again by uvicorn once it has shut down: the server's end, as the app's
        return 0


def _misplaced_serve_options(args) -> str | None:
    """Why options given to `serve` would do nothing there (each serves one protocol), or None."""
    if args.wyoming and args.api_key is not None:
        return ("--api-key: Wyoming has no keys (anyone who can reach its port can use it); listen only on a network "
                "you trust, or leave --api-key out.")
    if not args.wyoming and (args.seed is not None or args.check_budget_ms is not None):
        return ("--seed and --check-budget-ms are for --wyoming: API clients send their own seed with each request "
                "(docs/api.md).")
    return None


def cmd_synth(args) -> int:
    from app.cli import synth

    return synth(args, model=_model(args))


def cmd_bench(args) -> int:
    if args.batching:
        from tools.bench_batch import main
    else:
        from tools.bench import main

    return main(args, model=_model(args))


def cmd_profile(args) -> int:
    from tools.trace import main

    return main(args, model=_model(args))


def cmd_quant_report(args) -> int:
    from tools.quant_report import main

    return main(args, model=_model(args))


def cmd_render(args) -> int:
    from app.studio.cli import render

    return render(args, model=_model(args))


def cmd_voices(args) -> int:
    from app.library import cli_list

    return cli_list()


def cmd_doctor(args) -> int:
    from app.doctor import run

    return run(model=_model(args))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("voicedesk")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """A usage mistake ends in one line and exit status 2, like every other mistake (subcommands too)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="voicedesk", description="Local voice cloning (OmniVoice). Without a command, `ui` "
                                     "runs: `voicedesk --demo` starts the app on the demo model.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"voicedesk {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="command")

    ui = sub.add_parser("ui", help="start the app in your browser (default)")
    _model_args(ui, default_mode=None, device=False)
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this computer only)")
    ui.add_argument("--port", type=int, default=None, help="default: first free port from 7860")
    ui.add_argument("--no-browser", action="store_true", help="do not open a browser tab")
    ui.add_argument("--api", action="store_true", help="also serve the OpenAI-compatible API at /v1")
    _api_key_arg(ui)
    ui.set_defaults(func=cmd_ui)

    serve = sub.add_parser("serve", help="serve only the OpenAI-compatible API (no UI, no browser), or Wyoming")
    _model_args(serve, default_mode=None, device=False)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this computer only)")
    serve.add_argument("--port", type=int, default=None, help="default: 7860 (with --wyoming: 10200)")
    _api_key_arg(serve)
    serve.add_argument("--wyoming", action="store_true",
                       help="serve the Wyoming protocol instead (Home Assistant's voice assistants; README)")
    serve.add_argument("--seed", type=int, help="with --wyoming: seed every answer from this number (the same "
                                                "text, the same audio; default: a random seed per answer)")
    serve.add_argument("--check-budget-ms", type=int,
                       help="with --wyoming: how much the app's take checks (when on) may add to a streamed clause, "
                            f"in ms (0: none; default {DEFAULT_BUDGET_MS})")
    serve.set_defaults(func=cmd_serve)

    synth = sub.add_parser("synth", help="speak a text in a voice, write a WAV, print the RTF")
    _model_args(synth)
    synth.add_argument("--text", required=True)
    synth.add_argument("--ref", help="reference clip (any audio file)")
    synth.add_argument("--ref-text", help="transcript of the reference clip")
    synth.add_argument("--voice", help="name of a saved voice")
    synth.add_argument("--instruct", help="voice design attributes, e.g. 'female, low pitch'")
    synth.add_argument("--language", help="language name or code (default: auto)")
    synth.add_argument("--speed", type=float)
    synth.add_argument("--duration", type=float, help="fixed output length in seconds")
    synth.add_argument("--steps", type=int, default=32)
    synth.add_argument("--pad", type=float, default=0.1, help="seconds of silence before and after (default 0.1)")
    synth.add_argument("--fade", type=float, default=0.1, help="seconds of fade-in and fade-out (default 0.1)")
    _normalize_arg(synth)
    synth.add_argument("--seed", type=int)
    synth.add_argument("--out", required=True, help="output .wav or .flac")
    synth.set_defaults(func=cmd_synth)

    bench = sub.add_parser("bench", help="benchmark the modes side by side")
    _model_args(bench)
    bench.add_argument("--random-weights", action="store_true", help="random weights at the true sizes")
    bench.add_argument("--modes", default=",".join(("upstream", *MODE_NAMES)),
                       help="comma list: upstream, fp32 and the quality modes (default: upstream and every mode)")
    bench.add_argument("--runs", type=int, default=5)
    bench.add_argument("--warmup", type=int, default=2)
    bench.add_argument("--workloads", default="all", help="comma list of workload names, or 'all'")
    bench.add_argument("--results", default="results", help="folder for the JSON results")
    bench.add_argument("--append-md", metavar="FILE", help="append a section to this markdown file")
    bench.add_argument("--batching", action="store_true",
                       help="the batching tables (long text streamed, best of N) in the first fast mode of --modes")
    bench.set_defaults(func=cmd_bench)

    prof = sub.add_parser("profile", help="profile one generation; write a Perfetto trace")
    _model_args(prof, modes=("upstream", *MODE_NAMES, "fp32"))
    prof.add_argument("--random-weights", action="store_true")
    prof.add_argument("--workload", default="baseline")
    prof.add_argument("--out", default="results/trace.json.gz")
    prof.set_defaults(func=cmd_profile)

    qr = sub.add_parser("quant-report", help="per-linear SQNR of the realtime quantization (CPU, fp32)")
    qr.add_argument("--model", help="checkpoint folder or hub id")
    qr.add_argument("--demo", action="store_true", help="use the tiny random checkpoint")
    qr.add_argument("--random-weights", action="store_true", help="random weights at the true sizes")
    qr.add_argument("--layers", help="comma list of layer indices (default: 5 evenly spaced, first and last)")
    qr.add_argument("--tokens", type=int, default=1024, help="prompt positions evaluated per linear (default 1024)")
    qr.add_argument("--out", help="also write the markdown report to this file")
    qr.set_defaults(func=cmd_quant_report)

    render = sub.add_parser("render", help="render a script or book (.md .txt .srt .epub) to an audiobook + SRT")
    _model_args(render)
    render.add_argument("script", help="the script (.md), or prose (.txt), subtitles (.srt) or a book (.epub)")
    render.add_argument("--out", required=True, help="output .m4b (with chapters), .mp3, .flac or .wav; the "
                                                     ".srt is written beside it")
    render.add_argument("--voice", help="saved voice of the narrator (lines without a name); default: automatic")
    render.add_argument("--language", help="language name or code (default: auto)")
    render.add_argument("--steps", type=int, default=32, help="diffusion steps per line (default 32)")
    _normalize_arg(render)
    render.add_argument("--loudness", type=float, default=-18.0, help="loudness target in LUFS (default -18)")
    render.add_argument("--per-chapter", action="store_true", help="one file per chapter instead of one book")
    render.set_defaults(func=cmd_render)

    voices = sub.add_parser("voices", help="list saved voices")
    voices.set_defaults(func=cmd_voices)

    doctor = sub.add_parser("doctor", help="check GPU, driver, ffmpeg, audio devices, model files, disk")
    doctor.add_argument("--model")
    doctor.add_argument("--demo", action="store_true")
    doctor.set_defaults(func=cmd_doctor)
    parser.epilog = "options of ui, the default command:\n" + _options_section(ui)
    return parser


def _options_section(parser: argparse.ArgumentParser) -> str:
    """The option lines of a subcommand's help, for the top-level help of the default command."""
    text = parser.format_help()
    lines = text[text.index("options:") + len("options:"):].strip("\n").splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("-h, --help")) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "ui")  # the default command: `voicedesk --demo` is `voicedesk ui --demo`
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
