"""The benches' --model, --demo and --mode: which checkpoint a bench loads and in which quality mode, either as
the options of the `launcher.py serve` it starts (the API benches: tools/bench_server.py) or as an Engine in its
own process (tools/bench_threads.py, tools/profile_takes.py)."""
from __future__ import annotations

import argparse

from engine.config import DEFAULT_MODE, MODE_NAMES


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """--model, --demo and --mode: which checkpoint is loaded, in which quality mode."""
    parser.add_argument("--model", help="checkpoint folder (default: the app's default)")
    parser.add_argument("--demo", action="store_true", help="the tiny random checkpoint")
    parser.add_argument("--mode", default=DEFAULT_MODE.value, choices=MODE_NAMES)


def model_options(args: argparse.Namespace) -> list[str]:
    """`launcher.py serve`'s options for the checkpoint and mode of `add_model_options`."""
    model = ["--demo"] if args.demo else (["--model", args.model] if args.model else [])
    return ["--mode", args.mode, *model]


def load_engine(args: argparse.Namespace, device: str = "auto"):
    """The Engine of `add_model_options`' checkpoint and mode, loaded in this process on `device` (--demo before
    --model, as `model_options` has it; neither: the app's default checkpoint)."""
    from engine.constants import DEMO_MODEL
    from engine.engine import Engine

    return Engine.load(DEMO_MODEL if args.demo else args.model, device=device, mode=args.mode)
