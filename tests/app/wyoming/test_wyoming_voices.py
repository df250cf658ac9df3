"""How a Wyoming request's voice name is resolved (app/wyoming/voices.py's chosen_voice): as the API resolves it,
no name meaning the automatic voice and an unknown name saying what is offered; a lookup loads only the voice
chosen, and one that finds nothing loads none."""
import pytest
from saved_voices import counting_loads, make_voice, named_by_hand, torn

from app.api.voices import BUILTIN
from app.library import VoiceLibrary
from app.wyoming.voices import AUTOMATIC, UnknownVoice, chosen_voice

UNKNOWN = "^There is no voice '{}' here: the info event lists the saved voices and the presets\\.$"


@pytest.fixture
def library(tmp_path):
    library = VoiceLibrary(tmp_path / "voices")
    for i in range(5):
        library.save(f"Voice {i}", make_voice(transcript=f"Voice {i}.", seed=i))
    return library


def test_no_name_is_the_automatic_voice(library):
    for name in (None, "", "  "):
        assert chosen_voice(library, name) is AUTOMATIC


def test_a_saved_voice_by_name_or_folder_loads_only_it(library, monkeypatch):
    loaded = counting_loads(monkeypatch)
    chosen = chosen_voice(library, " voice 2 ")
    assert (chosen.voice.transcript, chosen.instruct, chosen.label) == ("Voice 2.", None, "Voice 2")
    assert chosen_voice(library, "VOICE-4").voice.transcript == "Voice 4."
    assert loaded == [library.root / "voice-2", library.root / "voice-4"]


def test_a_preset_loads_no_voice(library, monkeypatch):
    loaded = counting_loads(monkeypatch)
    chosen = chosen_voice(library, "Echo")
    assert (chosen.voice, chosen.instruct) == (None, BUILTIN["echo"]) and loaded == []


def test_an_unknown_name_says_what_is_offered_and_loads_nothing(library, monkeypatch):
    loaded = counting_loads(monkeypatch)
    with pytest.raises(UnknownVoice, match=UNKNOWN.format("nobody-here")):
        chosen_voice(library, "nobody-here")
    assert loaded == []


def test_a_damaged_saved_voice_is_unknown_or_the_preset_of_its_name(library):
    torn(library.get("voice-3"))
    with pytest.raises(UnknownVoice, match=UNKNOWN.format("Voice 3")):
        chosen_voice(library, "Voice 3")
    named_by_hand(library.get("voice-1"), "Sage")
    torn(library.get("voice-1"))
    assert chosen_voice(library, "sage").instruct == BUILTIN["sage"]
