"""What README.md and docs/ name exists: every `voicedesk` command they write is one the CLI accepts (README's are
the installed command's), every file they point to is in the tree, every module of the packages is on
docs/ARCHITECTURE.md's map, and every environment variable they name is read by the code."""
import re
import shlex
from pathlib import Path

import pytest

import launcher

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# docs/latency.md tells the first sound's history in order: its early sections name files a later one replaced
CURRENT_DOCS = [doc for doc in DOCS if doc.name != "latency.md"]
CODE_BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.S)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"(?:^|\s)(?:voicedesk|launcher\.py)((?: [^\s#]+)*)")
PATH = re.compile(r"(?<![\w/.-])((?:engine|app|kernels|tools|tests|docs|assets|\.ci)/[\w./-]*\w)(\*?)")


def code_lines(text: str) -> list[str]:
    """The lines of the code blocks and the code spans of a markdown text."""
    lines = [line for block in CODE_BLOCK.findall(text) for line in block.splitlines()]
    return lines + CODE_SPAN.findall(CODE_BLOCK.sub("", text))


def written_commands() -> list[tuple[str, str]]:
    """(doc name, argument string) of every `voicedesk ...` or `launcher.py ...` command in the docs' code;
    a synopsis's optional parts ([--port 10200]) count as written, placeholders (<folder>, $FULL, N) as values."""
    found = []
    for doc in DOCS:
        for line in code_lines(doc.read_text(encoding="utf-8")):
            if "|" in line:  # a synopsis of the commands, not a command
                continue
            for args in COMMAND.findall(line.split(" #")[0]):
                args = re.sub(r"<[^>]*>", "VALUE", args).replace("[", "").replace("]", "").replace("...", "")
                args = re.sub(r"(?<= )N(?= |$)", "1", args)  # a number to choose
                found.append((doc.name, args.strip()))
    return found


def test_every_written_command_is_one_the_cli_accepts():
    commands = written_commands()
    firsts = {shlex.split(args)[0] if args else "" for _, args in commands}
    assert {"synth", "render", "serve", "bench", "doctor", "--demo"} <= firsts  # the reading finds them
    for doc, args in commands:
        argv = shlex.split(args)
        if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
            argv.insert(0, "ui")  # as launcher.main does: `voicedesk --demo` is `voicedesk ui --demo`
        if argv[-1] in ("-h", "--help", "--version"):
            continue
        try:
            launcher.build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{doc}: `voicedesk {args}` is refused by the CLI")


def test_the_readme_runs_the_installed_command():
    """README.md is read by whoever installed the package (`pip install .`): its commands are `voicedesk ...`, which
    pip puts on the path; `python launcher.py` works only in a checkout's folder."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [line for line in code_lines(readme) if "launcher.py" in line] == []


def test_every_file_the_docs_point_to_exists():
    missing = []
    for doc in CURRENT_DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in PATH.finditer(text):
            path, star = match.groups()
            if text[:match.start()].endswith("--out "):  # a file the command writes
                continue
            if star:
                exists = any(ROOT.glob(path + "*"))
            else:  # a module's function or value (app/settings.RANGES) points to the module
                exists = any((ROOT / name).exists() for name in (path, path.rstrip("/."), path + ".py",
                                                                   path.rsplit(".", 1)[0] + ".py"))
            if not exists:
                missing.append(f"{doc.name}: {path}")
    assert missing == []


def test_every_module_is_on_the_architecture_map():
    architecture = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    modules = [*ROOT.glob("engine/**/*.py"), *ROOT.glob("app/**/*.py"), *ROOT.glob("tools/*.py"),
               *ROOT.glob("app/assets/*.js")]
    unnamed = [str(path.relative_to(ROOT)) for path in modules if path.stem != "__init__"
               and not re.search(rf"(?<![\w-]){re.escape(path.stem)}(?![\w-])", architecture)]
    assert unnamed == []


def test_every_environment_variable_named_is_read_by_the_code():
    code = "\n".join(path.read_text(encoding="utf-8") for folder in ("engine", "app", "tools")
                     for path in (ROOT / folder).rglob("*.py"))
    code += (ROOT / "launcher.py").read_text(encoding="utf-8")
    named = {name for doc in DOCS
             for name in re.findall(r"VOICEDESK_[A-Z0-9_]*[A-Z0-9]", doc.read_text(encoding="utf-8"))}
    assert named >= {"VOICEDESK_MODEL", "VOICEDESK_API_KEY", "VOICEDESK_HOME"}
    assert sorted(name for name in named if name not in code) == []
