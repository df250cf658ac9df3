"""What the app shows of a saved voice without the app running: the Clone tab's box for the voice chosen and its
reference clip as app/downloads.py serves it. Both read the library's entry (its small files): no voice is loaded."""
from types import SimpleNamespace

import numpy as np
from saved_voices import counting_loads, make_voice, torn
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.downloads import download_routes, voice_reference_url
from app.library import VoiceLibrary
from app.ui.clone import _show_voice

CLIP = (np.zeros(2400, np.float32), 24000)


def test_the_clone_tab_describes_the_voice_chosen_from_its_entry(tmp_path, monkeypatch):
    library = VoiceLibrary(tmp_path / "voices")
    library.save("Ann", make_voice(transcript="In the folder ann.", frames=75), reference=CLIP)
    chosen = []
    show = _show_voice(SimpleNamespace(library=library, save_settings=lambda last_voice: chosen.append(last_voice)))
    loaded = counting_loads(monkeypatch)
    _, _, info, player = show("ann")
    assert info.startswith("**Ann** · 3.0 s · saved ") and info.endswith("\n\n> In the folder ann.")
    assert voice_reference_url("ann") in player and chosen == ["ann"] and loaded == []


def test_the_clone_tab_says_so_where_the_voice_chosen_is_gone(tmp_path):
    """A voice deleted or renamed (its folder follows the name) in another tab after this page listed it: the box
    says so in place of the voice it showed (no error pop-up) and the voice is not remembered as the last one."""
    library = VoiceLibrary(tmp_path / "voices")
    library.save("Ann", make_voice(), reference=CLIP)
    library.save("Bob", make_voice(seed=1))
    chosen = []
    show = _show_voice(SimpleNamespace(library=library, save_settings=lambda last_voice: chosen.append(last_voice)))
    library.rename("ann", "Anna")
    library.delete("bob")
    for slug in ("ann", "bob"):
        box, clip_box, info, player = show(slug)
        assert (box.visible, clip_box.visible, info, player) == \
            (True, False, f"⚠ There is no saved voice '{slug}'.", None)
    assert chosen == []


def test_a_reference_clip_is_served_while_its_voice_is_listed_and_has_one(tmp_path, monkeypatch):
    """404 where there is no voice (a slug too long for a folder name among them), no clip, or info files or a
    tokens file's header that show the voice damaged (tokens cut short: the header says how long the file is)."""
    library = VoiceLibrary(tmp_path / "voices")
    library.save("Ann", make_voice(), reference=CLIP)
    library.save("No clip", make_voice(seed=1))
    torn(library.save("Torn", make_voice(seed=2), reference=CLIP))
    (library.save("Broken meta", make_voice(seed=3), reference=CLIP).folder / "meta.json").write_text("{oops")
    client = TestClient(Starlette(routes=download_routes(SimpleNamespace(library=library))))
    loaded = counting_loads(monkeypatch)
    long = "x" * 300  # too long a folder name for the file system: Path.is_dir raised OSError (a 500)
    got = {slug: client.get("/" + voice_reference_url(slug)) for slug in ("ann", "no-clip", "torn", "broken-meta",
                                                                            "gone", long)}
    assert {slug: answer.status_code for slug, answer in got.items()} == \
        {"ann": 200, "no-clip": 404, "torn": 404, "broken-meta": 404, "gone": 404, long: 404}
    assert got["ann"].content == (library.root / "ann" / "reference.wav").read_bytes()
    assert loaded == []
