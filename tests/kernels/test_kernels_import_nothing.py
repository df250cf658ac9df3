"""kernels/ is the floor of the layers: none of its modules imports anything of the project (engine,
app, tools, launcher), at module level or inside a function, so it can be lifted out or tested alone.
Checked on the source (ast), so imports that only run on a GPU or on first use count too."""
import ast
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
PROJECT = {"engine", "app", "tools", "launcher", "tests"}


def project_imports(path: Path) -> list[str]:
    """Names of project modules that the file imports anywhere in its body."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in PROJECT]
    return found


def test_kernels_import_nothing_of_the_project():
    sources = sorted(KERNELS.rglob("*.py"))
    assert len(sources) > 10  # the package was found
    offenders = {str(p.relative_to(KERNELS)): names for p in sources if (names := project_imports(p))}
    assert offenders == {}
