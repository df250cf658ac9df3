"""tools/small_card.py's arguments (its run needs an NVIDIA GPU: tests/gpu/run_gpu.sh step smallcard)."""
import pytest

from tools.small_card import parse


def test_defaults_stand_for_an_8_gb_card_in_high_fidelity():
    args = parse(["--model", "/ckpt"])
    assert (args.model, args.mode, args.gib, args.json, args.quick) == ("/ckpt", "hifi", 7.0, None, False)


def test_a_mode_and_a_cap():
    args = parse(["--model", "/ckpt", "--mode", "realtime", "--gib", "10.5", "--json", "/tmp/out.jsonl", "--quick"])
    assert (args.mode, args.gib, args.json, args.quick) == ("realtime", 10.5, "/tmp/out.jsonl", True)


@pytest.mark.parametrize("argv", [[], ["--model", "/ckpt", "--gib", "0"], ["--model", "/ckpt", "--gib", "nan"],
                                  ["--model", "/ckpt", "--mode", "eager"]])
def test_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
