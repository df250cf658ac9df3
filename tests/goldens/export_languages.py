"""Write engine/text/data/languages.json (language id -> display name) from upstream OmniVoice's table.

Usage: python tests/goldens/export_languages.py [path/to/omnivoice/utils/lang_map.py]

Without an argument it uses the omnivoice package installed in the running Python (found without
importing it: its __init__ needs torchaudio).
"""
import importlib.util
import json
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parents[2] / "engine" / "text" / "data" / "languages.json"


def upstream_lang_map_path() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    spec = importlib.util.find_spec("omnivoice")
    if spec is not None and spec.submodule_search_locations:
        return Path(spec.submodule_search_locations[0]) / "utils" / "lang_map.py"
    sys.exit("omnivoice is not installed here: pass the path of its utils/lang_map.py")


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location("upstream_lang_map", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    path = upstream_lang_map_path()
    lang_map = load_module(path)
    names = {lang_id: lang_map.lang_display_name(name) for name, lang_id in lang_map.LANG_NAME_TO_ID.items()}
    # Our resolver looks names up by lowercasing the display name: that must give upstream's key back.
    assert len(names) == len(lang_map.LANG_NAME_TO_ID), "a language id with two names"
    assert all(names[i].lower() == n for n, i in lang_map.LANG_NAME_TO_ID.items()), "display name round trip"
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(dict(sorted(names.items())), ensure_ascii=False, indent=0) + "\n", "utf-8")
    print(f"{len(names)} languages from {path} -> {OUTPUT}")


if __name__ == "__main__":
    main()
