"""tools/bench_server.py: the benches' checkpoint options become `launcher.py serve`'s (the server itself is
exercised by tests/tools/test_bench_api.py)."""
import argparse

import pytest

from tools.bench_server import add_model_options, model_options


@pytest.mark.parametrize("argv, options", [
    ([], ["--mode", "hifi"]),
    (["--demo", "--mode", "eager"], ["--mode", "eager", "--demo"]),
    (["--model", "/ckpt", "--mode", "realtime"], ["--mode", "realtime", "--model", "/ckpt"]),
    (["--demo", "--model", "/ckpt"], ["--mode", "hifi", "--demo"])])
def test_model_options(argv, options):
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    assert model_options(parser.parse_args(argv)) == options
