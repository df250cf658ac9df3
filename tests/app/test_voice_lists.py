"""The voice lists a page load and the API build (the Clone tab's dropdown and the voice it opens on, the Studio's
narrators, the API's and Wyoming's voice lists): the library's `entries()`, from each voice's small files and its
tokens file's header, so no voice is loaded however many are saved."""
from types import SimpleNamespace

import pytest
from saved_voices import counting_loads, make_voice, torn

from app.api.voices import list_voices
from app.library import VoiceLibrary
from app.ui.clone import NEW_CLIP, saved_voice, voice_choices
from app.ui.studio_handlers import narrators
from app.wyoming.voices import describe


@pytest.fixture
def library(tmp_path):
    library = VoiceLibrary(tmp_path / "voices")
    for i, name in enumerate(("Cy", "Ann", "Bob")):
        library.save(name, make_voice(seed=i))
    torn(library.save("Torn", make_voice(seed=3)))
    return library


def test_the_lists_name_the_usable_voices_in_the_librarys_order_and_load_none(library, monkeypatch):
    ctx = SimpleNamespace(library=library, settings=SimpleNamespace(last_voice="bob"))
    loaded = counting_loads(monkeypatch)
    assert voice_choices(ctx)[1:] == [("Ann", "ann"), ("Bob", "bob"), ("Cy", "cy")]
    assert saved_voice(ctx) == "bob"
    assert narrators(ctx)[1:] == [("Ann", "Ann"), ("Bob", "Bob"), ("Cy", "Cy")]
    assert [v["id"] for v in list_voices(library) if v["type"] == "audio_sample"] == ["ann", "bob", "cy"]
    assert [v.name for v in describe(library, "0").tts[0].voices][:3] == ["ann", "bob", "cy"]
    assert loaded == []


@pytest.mark.parametrize("last", [None, "torn", "gone", "..", "x" * 300, NEW_CLIP])
def test_the_clone_tab_opens_on_a_new_clip_when_the_last_voice_is_not_listed(library, monkeypatch, last):
    """Damaged, deleted (or renamed away), no saved voice at all: as `voice_choices` does not list it."""
    ctx = SimpleNamespace(library=library, settings=SimpleNamespace(last_voice=last))
    loaded = counting_loads(monkeypatch)
    assert saved_voice(ctx) == NEW_CLIP and last not in {slug for _, slug in voice_choices(ctx)[1:]}
    assert loaded == []
