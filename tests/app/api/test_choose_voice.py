"""Which voice a request's voice id means (app/api/voices.py's choose_voice, through VoiceLibrary.match_voice): a
saved voice by its folder name or name, in any case and with spaces around it, the first in the library's list
order when several match, damaged ones passed over; else a built-in name; else 404. Finding it loads only the
voice chosen, not the whole library."""
import pytest
from saved_voices import counting_loads, make_voice, named_by_hand, torn

from app.api.errors import ApiError
from app.api.voices import BUILTIN, choose_voice, list_voices
from app.library import VoiceLibrary


@pytest.fixture
def library(tmp_path):
    return VoiceLibrary(tmp_path / "voices")


def saved(library, name, transcript):
    return library.save(name, make_voice(transcript=transcript, seed=len(transcript)))


def spoken_by(chosen) -> str:
    """The transcript of the saved voice chosen, which tells the voices of these tests apart."""
    return chosen.voice.transcript


def test_a_saved_voice_by_its_name_or_folder_in_any_case_and_with_spaces_around(library):
    saved(library, "Grandpa Reading", "Grandpa.")
    for voice_id in ("Grandpa Reading", "grandpa READING", "  Grandpa Reading\t", "grandpa-reading",
                     " GRANDPA-Reading \n"):
        chosen = choose_voice(library, voice_id, "slowly")
        assert (spoken_by(chosen), chosen.instruct, chosen.label) == ("Grandpa.", "slowly", "Grandpa Reading")
    for voice_id in ("grandpa  reading", "grandpa", "grandpa_reading"):  # spaces inside count; no other spelling
        with pytest.raises(ApiError, match=f"^There is no voice '{voice_id}': GET /v1/audio/voices lists"):
            choose_voice(library, voice_id, None)


def test_a_built_in_name_in_any_case_and_with_spaces_around(library):
    saved(library, "Grandpa Reading", "Grandpa.")
    chosen = choose_voice(library, "  NoVa ", None)
    assert (chosen.voice, chosen.instruct, chosen.label) == (None, BUILTIN["nova"], f"nova ({BUILTIN['nova']})")
    chosen = choose_voice(library, "nova", "male, low pitch")
    assert (chosen.voice, chosen.instruct, chosen.label) == (None, "male, low pitch", "nova (male, low pitch)")


def test_a_saved_voice_wins_over_a_built_in_name(library):
    saved(library, "Nova", "My own Nova.")
    assert spoken_by(choose_voice(library, "NOVA", None)) == "My own Nova."
    named_by_hand(library.get("nova"), "Someone")
    assert spoken_by(choose_voice(library, "nova", None)) == "My own Nova."  # by its folder name


def test_an_unknown_voice_is_404_listing_the_built_in_names(library):
    saved(library, "Grandpa Reading", "Grandpa.")
    with pytest.raises(ApiError) as raised:
        choose_voice(library, " Nobody ", None)
    err = raised.value
    assert (err.status, err.param, err.code) == (404, "voice", "voice_not_found")
    assert err.message == (f"There is no voice ' Nobody ': GET /v1/audio/voices lists the saved voices and the "
                           f"built-in names ({', '.join(BUILTIN)}).")


def test_of_voices_whose_names_differ_only_in_case_the_first_folder_wins(library):
    """The library lists equal names in folder order: the voice in the folder ann, though saved last (creation
    order would give the other) and though a name map (find_voice's rule) gives the folder that sorts last."""
    in_zed = saved(library, "Zed", "In the folder zed.")
    saved(library, "Ann", "In the folder ann.")
    named_by_hand(in_zed, "aNN")
    for voice_id in ("Ann", "aNN", "ANN"):
        assert spoken_by(choose_voice(library, voice_id, None)) == "In the folder ann."
        assert choose_voice(library, voice_id, None).label == "Ann"
    assert library.find_voice("ann").transcript == "In the folder zed."  # the two rules differ, as documented


def test_a_name_and_a_folder_name_that_match_go_by_the_list_order_of_the_names(library):
    """One voice matches by its name, another by its folder name: the one whose name sorts first is chosen, which
    is neither 'a name first' nor 'a folder name first', nor folder order, nor the order they were saved in."""
    called_bob = saved(library, "Zed", "Called bob, in the folder zed.")
    in_bob = saved(library, "Bob", "In the folder bob.")
    named_by_hand(called_bob, "bob")
    named_by_hand(in_bob, "Robert")  # listed as: bob (folder zed), Robert (folder bob)
    assert spoken_by(choose_voice(library, "BOB", None)) == "Called bob, in the folder zed."
    named_by_hand(in_bob, "Aaron")  # listed as: Aaron (folder bob), bob (folder zed)
    assert spoken_by(choose_voice(library, "BOB", None)) == "In the folder bob."


def test_a_damaged_saved_voice_is_passed_over(library):
    torn(saved(library, "Nova", "Torn."))
    chosen = choose_voice(library, "Nova", None)  # the built-in name, as the library does not list it
    assert (chosen.voice, chosen.label) == (None, f"nova ({BUILTIN['nova']})")
    torn(saved(library, "Zed", "Torn too."))
    with pytest.raises(ApiError, match=r"^There is no voice 'zed': GET /v1/audio/voices lists"):
        choose_voice(library, "zed", None)
    first = saved(library, "Ann", "Torn, in the folder ann.")
    named_by_hand(saved(library, "Zoe", "Usable, in the folder zoe."), "ANN")
    torn(first)
    assert spoken_by(choose_voice(library, "ann", None)) == "Usable, in the folder zoe."


def test_a_voice_whose_info_gives_no_name_is_passed_over_even_by_its_folder_name(library):
    """The library lists it as damaged, under its folder name: that name does not choose it (a preset of that name
    is chosen), nor does it stop another voice being chosen."""
    for name, info in (("Nova", "{oops"), ("Echo", '{"name": 5}'), ("Sage", None)):
        folder = saved(library, name, f"{name}, no name.").folder
        if info is None:
            (folder / "meta.json").unlink()
        else:
            (folder / "meta.json").write_text(info)
    saved(library, "Zed", "Zed.")
    for voice_id in ("nova", "echo", "sage"):
        assert choose_voice(library, voice_id, None).voice is None, voice_id
    assert spoken_by(choose_voice(library, "zed", None)) == "Zed."


def test_names_match_and_sort_by_unicode_case_folding(library):
    """'ß' folds to 'ss', which lower-casing does not do: 'SS' is the name of one voice and the folder name of
    another, and the one whose name folds first in the list ('ß' as 'ss' before 'st') is chosen."""
    saved(library, "Straße", "Straße.")  # folder strae
    saved(library, "Fuss", "Fuss.")  # folder fuss
    assert spoken_by(choose_voice(library, "STRASSE", None)) == "Straße."
    assert spoken_by(choose_voice(library, "FUß", None)) == "Fuss."
    named_by_hand(saved(library, "Ss", "In the folder ss."), "st")
    saved(library, "ß", "Called ß.")
    assert [e.name for e in library.entries()] == ["Fuss", "ß", "st", "Straße"]
    assert spoken_by(choose_voice(library, "SS", None)) == "Called ß."


def test_a_voice_whose_length_is_not_a_number_is_passed_over(library):
    odd = saved(library, "Alloy", "Odd length.")
    (odd.folder / "meta.json").write_text('{"name": "Alloy", "seconds": "long"}')
    assert choose_voice(library, "alloy", None).voice is None  # the built-in alloy
    assert [v["type"] for v in list_voices(library)] == ["prompt"] * len(BUILTIN)  # GET /v1/audio/voices: no error


def test_choosing_loads_one_voice_of_many_and_none_for_a_built_in_name(library, monkeypatch):
    for i in range(6):
        saved(library, f"Voice {i}", f"Voice {i}.")
    loaded = counting_loads(monkeypatch)
    assert spoken_by(choose_voice(library, " VOICE 3 ", None)) == "Voice 3."
    assert loaded == [library.root / "voice-3"]
    assert spoken_by(choose_voice(library, "voice-5", None)) == "Voice 5."  # by its folder name
    assert loaded == [library.root / "voice-3", library.root / "voice-5"]
    assert choose_voice(library, "nova", None).voice is None
    with pytest.raises(ApiError):
        choose_voice(library, "nobody", None)
    assert loaded == [library.root / "voice-3", library.root / "voice-5"]


def test_choosing_answers_as_the_first_match_in_the_voice_list(library):
    """Against the rule as a loop over `entries()` says it, on a library of awkward names: names equal but for
    case, a name that is another voice's folder name, damaged voices, a built-in name."""
    for name in ("Ann", "Bob", "Nova", "Zed", "Zoe", "Cy", "Dee"):
        saved(library, name, f"Saved as {name}.")
    named_by_hand(library.get("zed"), "ann")
    named_by_hand(library.get("zoe"), "bob")
    named_by_hand(library.get("bob"), "Zed")
    named_by_hand(library.get("cy"), "NOVA")
    torn(library.get("nova"))
    torn(library.get("dee"))
    entries = library.entries()
    for voice_id in ("ann", "ANN", "bob", "zed", "zoe", "cy", "nova", "dee", " Zed ", "nobody", "alloy"):
        wanted = voice_id.strip().casefold()
        first = next((e for e in entries if wanted in (e.slug.casefold(), e.name.casefold())), None)
        try:
            chosen = choose_voice(library, voice_id, None)
        except ApiError:
            chosen = None
        if first is not None:
            assert (spoken_by(chosen), chosen.label) == (first.transcript, first.name), voice_id
        elif wanted in BUILTIN:
            assert chosen.voice is None and chosen.label.startswith(wanted), voice_id
        else:
            assert chosen is None, voice_id
