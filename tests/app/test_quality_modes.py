"""The quality modes have one home (engine.config.Mode): every place that offers or names them (the launcher's
--mode, the tools' --mode, the mode setting, the quality switch, the metrics line) reads them there, so none of
them drifts when a mode is added, renamed or relabelled."""
import argparse

import pytest

import launcher
from app.generation import mode_label
from app.settings import CHOICES, Settings
from app.ui import status
from engine.config import DEFAULT_MODE, MODE_NAMES, Mode
from engine.errors import SettingError
from tools.model_options import add_model_options

NAMES = ("eager", "hifi", "realtime")  # what users and scripts already type: a rename would break them


def mode_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each launcher command's --mode option."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    return {name: action for name, command in commands.items() for action in command._actions
            if action.dest == "mode"}


def test_the_modes_are_the_ones_users_type():
    assert set(MODE_NAMES) == set(NAMES) and Mode(DEFAULT_MODE) is Mode.HIFI


def test_every_launcher_command_offers_the_modes():
    options = mode_options(launcher.build_parser())
    assert set(options) == {"ui", "serve", "synth", "bench", "profile", "render"}
    for name, option in options.items():
        offered = [c for c in option.choices if c not in ("upstream", "fp32")] if name == "profile" else option.choices
        assert tuple(offered) == MODE_NAMES, name
        assert option.default in (None, DEFAULT_MODE.value), name  # None: the app's saved mode


def test_the_bench_compares_every_mode_by_default():
    """`launcher.py bench` with no --modes: upstream, then every mode, in the enum's order."""
    bench = launcher.build_parser().parse_args(["bench"])
    assert bench.modes.split(",") == ["upstream", *MODE_NAMES]


def test_the_tools_offer_the_modes():
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    option = next(a for a in parser._actions if a.dest == "mode")
    assert tuple(option.choices) == MODE_NAMES and option.default == DEFAULT_MODE.value


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_the_mode_setting_takes_each_mode(tmp_path, mode):
    path = tmp_path / "settings.json"
    assert Settings().updated(path, mode=mode).mode == mode and Settings.load(path).mode == mode
    assert CHOICES["mode"] == MODE_NAMES and Settings().mode == DEFAULT_MODE.value


def test_the_mode_setting_refuses_what_is_no_mode(tmp_path):
    with pytest.raises(SettingError, match=", ".join(MODE_NAMES)):
        Settings().updated(tmp_path / "settings.json", mode="turbo")


def test_the_labels_are_the_modes_own():
    assert {mode: mode_label(mode) for mode in MODE_NAMES} == {mode.value: mode.label for mode in Mode}
    assert len({mode.label for mode in Mode}) == len(Mode)
    switch = [*status.MODES, *status.SAME_PATH_MODES, status.EAGER]
    for label, value in switch:
        assert label.startswith(Mode(value).label), (label, value)
