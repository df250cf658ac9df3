"""One logging convention: every module logs to `logging.getLogger(__name__)` (the name says where a line
comes from), and the running app shows INFO and above from the project's own packages, warnings from others."""
from __future__ import annotations

import logging

PROJECT_PACKAGES = ("app", "engine", "kernels")


def configure_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for package in PROJECT_PACKAGES:
        logging.getLogger(package).setLevel(logging.INFO)
