"""The layout's promises, checked in fresh interpreters: the product (engine/, kernels/, app/) never imports
the instruments in tools/, and nothing under engine/ or kernels/ imports gradio or app/."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

IMPORT_ALL = """
import importlib, json, pkgutil, sys
for name in {packages}:
    package = importlib.import_module(name)
    for info in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def modules_loaded_by(*packages: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL.format(packages=list(packages))], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("packages, forbidden", [
    (("engine", "kernels"), {"tools", "app", "gradio"}),
    (("engine", "kernels", "app"), {"tools"}),
])
def test_product_packages_stay_out_of_what_they_must_not_use(packages, forbidden):
    assert not top_level(modules_loaded_by(*packages)) & forbidden
