"""The running app's log levels (app/logs.py): INFO from every package of ours, the engine's too."""
import logging

import pytest

from app.logs import PROJECT_PACKAGES, configure_logging


@pytest.fixture
def restored_levels():
    loggers = [logging.getLogger(name) for name in PROJECT_PACKAGES]
    levels = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)


def test_info_lines_of_the_engine_and_the_app_show(restored_levels):
    configure_logging()
    for module in ("engine.engine", "engine.lm.runner", "app.server", "app.studio.render", "kernels.w4a4_cuda"):
        assert logging.getLogger(module).isEnabledFor(logging.INFO), module
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
