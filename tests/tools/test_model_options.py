"""tools/model_options.py: the benches' checkpoint options become `launcher.py serve`'s (the server itself is
exercised by tests/tools/test_bench_api.py) or the Engine a bench loads in its own process."""
import argparse

import pytest

from engine.constants import DEMO_MODEL
from engine.engine import Engine
from tools.model_options import add_model_options, load_engine, model_options


def parsed(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("argv, options", [
    ([], ["--mode", "hifi"]),
    (["--demo", "--mode", "eager"], ["--mode", "eager", "--demo"]),
    (["--model", "/ckpt", "--mode", "realtime"], ["--mode", "realtime", "--model", "/ckpt"]),
    (["--demo", "--model", "/ckpt"], ["--mode", "hifi", "--demo"])])
def test_model_options(argv, options):
    assert model_options(parsed(argv)) == options


@pytest.mark.parametrize("argv, loaded", [
    ([], (None, "hifi")),
    (["--demo", "--mode", "eager"], (DEMO_MODEL, "eager")),
    (["--model", "/ckpt", "--mode", "realtime"], ("/ckpt", "realtime")),
    (["--demo", "--model", "/ckpt"], (DEMO_MODEL, "hifi"))])
def test_load_engine_loads_the_checkpoint_and_mode_serve_would(monkeypatch, argv, loaded):
    calls = []
    monkeypatch.setattr(Engine, "load", lambda model, device, mode: calls.append((model, device, mode)) or "engine")
    assert load_engine(parsed(argv)) == "engine" and calls == [(loaded[0], "auto", loaded[1])]
    assert load_engine(parsed(argv), device="cpu") == "engine" and calls[-1] == (loaded[0], "cpu", loaded[1])
