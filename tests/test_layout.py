"""The layers' promises (docs/ARCHITECTURE.md), checked twice: statically, over every import statement of every
module (lazy ones inside functions too), and in fresh interpreters, over what importing the packages loads
(which also sees a third-party package pulling in what ours must not)."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("engine", "kernels", "app", "launcher")

# (importer, what it must not import, why). A name covers its submodules; an importer "app" covers all of
# app/ except the prefixes in the exceptions column.
RULES = [
    ("engine", ("app", "tools", "launcher", "gradio"), (), "the engine serves every front end"),
    ("kernels", ("engine", "app", "tools", "launcher", "gradio"), (), "kernels are the floor"),
    ("app", ("gradio", "app.ui"), ("app.ui", "app.server"), "services are free of Gradio"),
    ("app", ("tools", "launcher"), (), "nothing in the product imports the instruments"),
    ("launcher", ("gradio",), (), "the launcher builds things, the UI owns Gradio"),
    ("tools", ("launcher",), (), "instruments call the app's own entry points"),
]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path) -> set[str]:
    """Every module an import statement in `path` names, relative imports resolved; `from x import y` gives
    both x and x.y (y may be a submodule)."""
    name = module_name(path, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def covers(prefix: str, module: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_violations(root: Path) -> list[str]:
    sources = [p for p in root.rglob("*.py") if p.relative_to(root).parts[0] in (*PRODUCT, "tools")
               and ".venv" not in p.parts]
    found = []
    for path in sorted(sources):
        importer = module_name(path, root)
        names = imported_names(path, root)
        for layer, forbidden, exceptions, why in RULES:
            if not covers(layer, importer) or any(covers(e, importer) for e in exceptions):
                continue
            for imported in sorted(names):
                if any(covers(f, imported) for f in forbidden):
                    found.append(f"{path.relative_to(root)} imports {imported} ({why})")
    return found


def tool_cycles(root: Path) -> list[tuple[str, str]]:
    """Pairs of tools/ modules that import each other."""
    graph = {module_name(p, root): {n for n in imported_names(p, root) if covers("tools", n)}
             for p in (root / "tools").rglob("*.py")}
    return sorted((a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, ()))


def test_every_import_statement_keeps_to_the_layers():
    assert layer_violations(ROOT) == []


def test_no_two_tools_import_each_other():
    assert tool_cycles(ROOT) == []


@pytest.mark.parametrize("file, source", [
    ("engine/lm/x.py", "def f():\n    from ...app import worker\n"),  # lazy and relative
    ("kernels/k.py", "import engine.folders\n"),
    ("app/service.py", "from .ui import output\n"),
    ("app/service.py", "from gradio import update\n"),
    ("app/studio/render.py", "from .. import ui\n"),
    ("tools/a.py", "import launcher\n"),
])
def test_a_planted_violation_is_found(tmp_path, file, source):
    (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / file).write_text(source)
    found = layer_violations(tmp_path)
    assert found and all(v.startswith(file) for v in found)


def test_gradio_stays_allowed_where_it_belongs(tmp_path):
    for file in ("app/ui/tab.py", "app/server.py"):
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text("import gradio as gr\nfrom ..generation import run\n")
    assert layer_violations(tmp_path) == []


def test_a_planted_tool_cycle_is_found(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "a.py").write_text("def f():\n    from tools.b import g\n")
    (tmp_path / "tools" / "b.py").write_text("from tools import a\n")
    assert tool_cycles(tmp_path) == [("tools.a", "tools.b")]


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


def test_every_module_logs_under_its_own_name():
    """The convention of app/logs.py: a logger named by hand would miss the levels the app sets."""
    named = []
    sources = (p for package in ("app", "engine", "kernels") for p in (ROOT / package).rglob("*.py"))
    for path in sorted(p for p in sources if p != ROOT / "app" / "logs.py"):  # the one that sets the levels
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "getLogger" and \
                    not (node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "__name__"):
                named.append(str(path.relative_to(ROOT)))
    assert named == []


def test_widgets_of_a_setting_take_its_bounds_from_the_settings():
    """One home for a setting's range (app/settings.RANGES): a slider bound to a setting that spells its
    bounds out would drift from what the settings file and the API accept."""
    from app.settings import RANGES

    spelled_out = []
    for path in sorted((ROOT / "app" / "ui").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "bind" and len(node.args) == 2):
                continue
            name, widget = node.args
            bounds = [arg for arg in widget.args[:2] if isinstance(arg, ast.Constant)] \
                if isinstance(widget, ast.Call) else []
            if isinstance(name, ast.Constant) and name.value in RANGES and \
                    any(isinstance(arg.value, (int, float)) for arg in bounds):  # a string (a LIMITS name) is none
                spelled_out.append(f"{path.name}: {name.value}")
    assert spelled_out == []
    from app.ui.advanced import LIMITS  # the advanced fields' table: a setting's bounds there are the settings' own

    assert {name: LIMITS[name][1:] for name in RANGES if name in LIMITS} == \
        {name: RANGES[name] for name in RANGES if name in LIMITS}
