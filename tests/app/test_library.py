import json
import logging
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import save_file
from saved_voices import counting_loads, make_voice, named_by_hand, torn

from app.library import LibraryError, VoiceLibrary, clean_name, slugify
from engine.errors import StorageError
from engine.voice import Voice


@pytest.fixture
def library(tmp_path):
    return VoiceLibrary(tmp_path / "voices")


@pytest.mark.parametrize("name, slug", [
    ("Grandpa Reading", "grandpa-reading"),
    ("Müller's voice!", "muller-s-voice"),
    ("../../etc/passwd", "etc-passwd"),
    ("C:\\Windows\\system32", "c-windows-system32"),
    ("小明", "voice"),
    ("CON", "con-voice"),
    ("a" * 100, "a" * 40),
])
def test_slugify_gives_safe_folder_names(name, slug):
    assert slugify(name) == slug


def test_clean_name_strips_control_characters_and_spaces():
    assert clean_name("  Ann\x00\n  Smith\t ") == "Ann Smith"
    assert clean_name("../../../escape/..\\..\\x") == "escape x"  # no path in a display name
    assert clean_name("AC/DC") == "AC DC" and clean_name("Mr. Smith") == "Mr. Smith"
    assert len(clean_name("x" * 500)) == 60
    with pytest.raises(LibraryError, match="Give the voice a name"):
        clean_name(" \n\t ")


@pytest.mark.parametrize("name", ["..", ".", "../..", " / "])
def test_a_name_of_path_marks_alone_is_refused_as_such(name):
    """It was told "Give the voice a name.", as if the box were empty."""
    with pytest.raises(LibraryError) as refused:
        clean_name(name)
    assert str(refused.value).startswith(f"'{name.strip()}' cannot name a voice: '/', '\\', '.' and '..' are left out")


def test_save_list_load(library):
    ref = (np.sin(np.arange(24000) / 10).astype(np.float32) * 0.3, 24000)
    entry = library.save("Grandpa Reading", make_voice(frames=75), reference=ref, language="en")
    assert entry.slug == "grandpa-reading" and entry.seconds == 3.0 and entry.language == "en"
    assert [e.name for e in library.entries()] == ["Grandpa Reading"]
    loaded = library.load_voice(entry.slug)
    assert torch.equal(loaded.tokens, make_voice(frames=75).tokens) and loaded.transcript == "Hello there."
    assert sf.info(str(entry.reference)).frames == 24000


def test_same_slug_gets_a_suffix_but_same_name_is_refused(library):
    a = library.save("Ann!", make_voice())
    b = library.save("Ann?", make_voice(seed=1))
    assert (a.slug, b.slug) == ("ann", "ann-2")
    with pytest.raises(LibraryError, match="already exists"):
        library.save("ann!", make_voice())


def test_a_name_is_refused_in_any_case_as_unicode_folds_it(library):
    library.save("Straße", make_voice())
    for name in ("STRASSE", "strasse", "straße"):
        with pytest.raises(LibraryError, match=r"^A voice named 'Straße' already exists: pick another name\.$"):
            library.unused_name(name)
    assert library.unused_name("  Strasse  2 ") == "Strasse 2"  # cleaned, and free


def test_of_names_that_differ_only_in_case_the_first_folder_is_named(library):
    """Names edited by hand can share a key; the one refusing is the first in folder order (the order scan() keeps
    for equal names), and the folder being renamed never refuses its own name."""
    later = library.save("Zed", make_voice())
    earlier = library.save("Bea", make_voice(seed=1))
    named_by_hand(later, "aNN")
    named_by_hand(earlier, "Ann")
    with pytest.raises(LibraryError, match=r"^A voice named 'Ann' already exists"):
        library.unused_name("ANN")
    with pytest.raises(LibraryError, match=r"^A voice named 'aNN' already exists"):
        library.rename(earlier.slug, "ann")  # its own folder allowed, the other refuses
    assert library.rename(later.slug, "Zed").name == "Zed"


def test_a_free_name_is_told_from_the_info_files_alone(library, monkeypatch):
    """unused_name (every save, rename and import) loaded every voice to read the names."""
    for i in range(4):
        library.save(f"Voice {i}", make_voice(seed=i))
    loaded = counting_loads(monkeypatch)
    assert library.unused_name("Voice 4") == "Voice 4"
    with pytest.raises(LibraryError, match="already exists"):
        library.unused_name("VOICE 2")
    assert loaded == []
    library.save("Voice 4", make_voice(seed=4))
    assert loaded == [library.root / "voice-4"]  # only the new voice, read back for its entry


def test_a_damaged_voice_keeps_the_name_it_is_listed_under(library):
    """The Voices tab (and list_voices, `voicedesk voices`) lists a damaged voice by the name its meta.json gives,
    else by its folder name: a new voice does not take a name the person sees there; deleting it frees the name."""
    torn(library.save("Torn tokens", make_voice()))
    (library.root / "no-files").mkdir()
    (library.save("Broken meta", make_voice(seed=2)).folder / "meta.json").write_text("{oops")
    assert {d.name for d in library.scan()[1]} == {"Torn tokens", "no-files", "broken-meta"}
    for name, listed in (("TORN TOKENS", "Torn tokens"), ("No-Files", "no-files"), ("broken-meta", "broken-meta")):
        with pytest.raises(LibraryError, match=rf"^A voice named '{listed}' already exists: pick another name\.$"):
            library.save(name, make_voice(seed=5))
    assert library.save("Broken meta", make_voice(seed=5)).slug == "broken-meta-2"  # not the name listed
    library.delete("torn-tokens")
    assert library.save("Torn tokens", make_voice(seed=6)).slug == "torn-tokens"


def test_rename_moves_the_folder(library):
    entry = library.save("Ann", make_voice())
    renamed = library.rename(entry.slug, "Bob Marley")
    assert renamed.slug == "bob-marley" and not entry.folder.exists()
    assert [e.name for e in library.entries()] == ["Bob Marley"]
    assert library.rename(renamed.slug, "BOB marley").slug == "bob-marley"  # same slug: name only


def test_the_voice_list_is_the_scans_usable_voices_with_no_voice_loaded(library, monkeypatch):
    """entries() (the dropdowns, the API's and Wyoming's voice lists) against scan() (every voice loaded, for the
    Voices tab), on a healthy library of awkward names: the same voices, names, slugs and order (by Unicode case
    folding, equal names by folder)."""
    for i, name in enumerate(("bob", "Ann", "Émile", "zed", "STRASSE", "Ånn", "cy")):
        library.save(name, make_voice(seed=i))
    named_by_hand(library.get("zed"), "ann")
    named_by_hand(library.get("cy"), "Straße")
    scanned = library.scan()[0]
    loaded = counting_loads(monkeypatch)
    assert library.entries() == scanned and loaded == []
    assert [(e.name, e.slug) for e in scanned] == [("Ann", "ann"), ("ann", "zed"), ("bob", "bob"), ("Straße", "cy"),
                                                   ("STRASSE", "strasse"), ("Ånn", "ann-2"), ("Émile", "emile")]


def _rewrite_voice_json(entry, **changes):
    meta = json.loads((entry.folder / "voice.json").read_text())
    (entry.folder / "voice.json").write_text(json.dumps({**meta, **changes}))


DAMAGE = {
    "tokens cut short": torn,
    "tokens missing": lambda entry: (entry.folder / "voice.safetensors").unlink(),
    "tokens complex": lambda entry: save_file({"tokens": make_voice().tokens.to(torch.complex64)},
                                              str(entry.folder / "voice.safetensors")),
    "seven codebooks": lambda entry: save_file({"tokens": make_voice().tokens[:7]},
                                               str(entry.folder / "voice.safetensors")),
    "loudness no number": lambda entry: _rewrite_voice_json(entry, rms="loud"),
    "voice.json of another version": lambda entry: _rewrite_voice_json(entry, version=2),
    "meta.json broken": lambda entry: (entry.folder / "meta.json").write_text("{oops"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_voice_list_leaves_out_what_the_voices_tab_shows_damaged(library, monkeypatch, damage):
    """Told from the small files and the tokens file's header (safetensors checks the file is as long as its header
    says), no voice loaded."""
    good = library.save("Good", make_voice())
    DAMAGE[damage](library.save("Odd", make_voice(seed=1)))
    loaded = counting_loads(monkeypatch)
    assert library.entries() == [good] and loaded == []
    usable, damaged = library.scan()
    assert usable == [good] and [d.slug for d in damaged] == ["odd"]


def test_a_saved_voice_of_no_loudness_number_is_damaged_and_the_log_says_why(library, caplog):
    """The person is told the folder is corrupt, as for voice.json's other problems; the log names the field."""
    loud = library.save("Loud", make_voice())
    _rewrite_voice_json(loud, rms=-1)
    with caplog.at_level(logging.WARNING, logger="app"), pytest.raises(
            LibraryError, match=r"^The saved voice 'Loud' is damaged \(voice.safetensors or voice.json is corrupt\)"):
        library.load_voice(loud.slug)
    assert f'{loud.folder / "voice.json"} gives a loudness ("rms") that is not a number of 0 or more.' in caplog.text


def test_codes_out_of_range_are_listed_and_refused_where_the_voice_is_loaded(library):
    """The trade of a list that does not load the voices: only the tokens' data tells such codes (a file VoiceDesk
    did not write), so the voice is listed (as `entry` gives it) but not by scan(), and get refuses it."""
    good = library.save("Good", make_voice())
    masked = library.save("Mask ids", make_voice(seed=1))
    save_file({"tokens": torch.full((8, 50), 1024)}, str(masked.folder / "voice.safetensors"))
    assert library.entries() == [good, masked]
    assert library.scan()[0] == [good] and [d.slug for d in library.scan()[1]] == ["mask-ids"]
    with pytest.raises(LibraryError, match=r"^The saved voice 'Mask ids' is damaged"):
        library.get(masked.slug)


def test_delete_and_unknown_slugs(library):
    entry = library.save("Ann", make_voice())
    library.delete(entry.slug)
    assert library.entries() == []
    for bad in ("ann", "..", "../voices", "/etc", ".tmp-x"):
        with pytest.raises(LibraryError):
            library.get(bad)


def test_a_damaged_voice_is_listed_as_damaged_and_can_be_deleted(library, caplog):
    good = library.save("Good", make_voice())
    (library.root / "no-files").mkdir()
    broken_meta = library.save("Broken meta", make_voice(seed=2))
    (broken_meta.folder / "meta.json").write_text("{oops")
    torn = library.save("Torn tokens", make_voice(seed=3))
    tokens = torn.folder / "voice.safetensors"
    tokens.write_bytes(tokens.read_bytes()[:100])  # cut short, as by a failing disk
    with caplog.at_level(logging.WARNING, logger="app"):
        assert [e.slug for e in library.entries()] == [good.slug]
        damaged = {d.slug: (d.name, d.problem) for d in library.scan()[1]}
    assert damaged == {"no-files": ("no-files", "voice.safetensors, voice.json, meta.json missing"),
                       "broken-meta": ("broken-meta", "meta.json cannot be read"),
                       "torn-tokens": ("Torn tokens", "voice.safetensors or voice.json is corrupt")}
    assert "no-files" in caplog.text and "broken-meta" in caplog.text and "torn-tokens" in caplog.text
    with pytest.raises(LibraryError, match=r"The saved voice 'Torn tokens' is damaged \(voice.safetensors or "
                                           r"voice.json is corrupt\): delete it in the Voices tab."):
        library.load_voice("torn-tokens")
    for slug in damaged:
        library.delete(slug)
    assert library.scan()[1] == [] and [e.slug for e in library.entries()] == [good.slug]


@pytest.mark.parametrize("seconds", ["long", None, [3.0], {"value": 3.0}, 10**400],
                         ids=["text", "null", "list", "object", "400 digits"])
def test_a_length_that_is_not_a_number_leaves_the_voice_listed_as_damaged(library, monkeypatch, seconds):
    good = library.save("Good", make_voice())
    odd = library.save("Odd length", make_voice(seed=1))
    info = json.loads((odd.folder / "meta.json").read_text())
    (odd.folder / "meta.json").write_text(json.dumps({**info, "seconds": seconds}))
    loaded = counting_loads(monkeypatch)
    assert [e.slug for e in library.entries()] == [good.slug]
    assert [(d.slug, d.name, d.problem) for d in library.scan()[1]] == \
        [("odd-length", "Odd length", 'meta.json gives a length ("seconds") that is not a number')]
    assert library.root / "odd-length" not in loaded  # told from meta.json alone
    with pytest.raises(LibraryError, match=r"^The saved voice 'Odd length' is damaged \(meta.json gives a length "):
        library.load_voice("odd-length")
    assert library.find_voice("good").transcript == "Hello there."


@pytest.mark.parametrize("file, content, problem", [
    ("meta.json", '{"name": "Odd", "seconds": ' + "1" * 5000 + "}", "meta.json cannot be read"),
    ("meta.json", "[" * 100_000, "meta.json cannot be read"),
    ("voice.json", "[1, 2]", "voice.safetensors or voice.json is corrupt"),
    ("voice.json", "[" * 100_000, "voice.safetensors or voice.json is corrupt"),
    ("voice.json", '{"format": "voicedesk-voice", "version": 1, "rms": "loud"}',
     "voice.safetensors or voice.json is corrupt"),
], ids=["5000 digits", "meta nested too deep", "voice.json a list", "voice.json nested too deep", "rms not a number"])
def test_a_file_edited_into_nonsense_leaves_the_voice_listed_as_damaged(library, file, content, problem):
    good = library.save("Good", make_voice())
    odd = library.save("Odd", make_voice(seed=1))
    (odd.folder / file).write_text(content)
    assert [e.slug for e in library.entries()] == [good.slug]
    assert [(d.slug, d.problem) for d in library.scan()[1]] == [("odd", problem)]


def test_tokens_of_a_type_torch_cannot_compare_leave_the_voice_listed_as_damaged(library):
    """Complex codes: PyTorch's NotImplementedError (no min/max for them) made scan()/entries() raise."""
    good = library.save("Good", make_voice())
    odd = library.save("Odd", make_voice(seed=1))
    save_file({"tokens": make_voice().tokens.to(torch.complex64)}, str(odd.folder / "voice.safetensors"))
    assert [e.slug for e in library.entries()] == [good.slug]
    assert [(d.slug, d.problem) for d in library.scan()[1]] == [("odd", "voice.safetensors or voice.json is corrupt")]


def test_an_entry_is_read_from_the_small_files_alone(library, monkeypatch):
    """What the Clone tab shows of a voice and the reference download use: the entry `get` gives (its transcript
    from voice.json), with no voice loaded (get loads the tokens)."""
    saved = library.save("Ann", make_voice(transcript="In the folder ann.", frames=75),
                         reference=(np.zeros(2400, np.float32), 24000), language="en")
    loaded = counting_loads(monkeypatch)
    entry = library.entry("ann")
    assert entry == saved and entry.transcript == "In the folder ann." and entry.reference == saved.reference
    assert loaded == []


def test_an_entry_of_no_saved_voice_is_refused(library):
    """A name too long for the file system too (a slug from a URL): Path.is_dir raised OSError for it."""
    library.save("Ann", make_voice())
    for slug in ("bob", "..", "../voices", "/etc", ".tmp-x", "", "x" * 300):
        with pytest.raises(LibraryError, match=rf"^There is no saved voice '{re.escape(slug)}'\.$"):
            library.entry(slug)


def test_an_entry_is_refused_where_its_small_files_show_the_voice_damaged(library):
    """As `get` refuses those voices: tokens cut short and a loudness that is no number too (the tokens file's
    header and voice.json tell them). Codes out of 0..1023 are not seen without loading the voice: the entry is
    given and the voice is refused where it is loaded."""
    (library.root / "no-files").mkdir()
    (library.save("Broken meta", make_voice(seed=1)).folder / "meta.json").write_text("{oops")
    (library.save("Odd voice json", make_voice(seed=2)).folder / "voice.json").write_text("[1, 2]")
    torn(library.save("Torn tokens", make_voice(seed=3)))
    loud = library.save("Loud", make_voice(seed=4))
    (loud.folder / "voice.json").write_text('{"format": "voicedesk-voice", "version": 1, "rms": "loud"}')
    for slug, name, problem in (("no-files", "no-files", "voice.safetensors, voice.json, meta.json missing"),
                                ("broken-meta", "broken-meta", "meta.json cannot be read"),
                                ("odd-voice-json", "Odd voice json", "voice.safetensors or voice.json is corrupt"),
                                ("torn-tokens", "Torn tokens", "voice.safetensors or voice.json is corrupt"),
                                ("loud", "Loud", "voice.safetensors or voice.json is corrupt")):
        with pytest.raises(LibraryError, match=rf"^The saved voice '{name}' is damaged \({problem}\): delete it in "
                                               r"the Voices tab\.$"):
            library.entry(slug)
    masked = library.save("Mask ids", make_voice(seed=5))
    save_file({"tokens": torch.full((8, 50), 1024)}, str(masked.folder / "voice.safetensors"))
    assert library.entry(masked.slug) == masked
    with pytest.raises(LibraryError, match=r"^The saved voice 'Mask ids' is damaged"):
        library.get(masked.slug)


def test_a_folder_this_user_may_not_open_is_listed_as_damaged(library, monkeypatch):
    """A folder without search permission for this user (copied in with sudo, say): Path.is_file raises
    PermissionError inside it (Python 3.11), which made scan() and every lookup raise. The tests may run as root,
    whom chmod does not stop, so is_file raises here as it would."""
    library.save("Good", make_voice(transcript="Good."))
    locked = library.save("Locked", make_voice(seed=1)).folder
    is_file = Path.is_file

    def guarded(path):
        if path.parent == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return is_file(path)

    monkeypatch.setattr(Path, "is_file", guarded)
    assert [e.slug for e in library.entries()] == ["good"]
    assert [d.slug for d in library.scan()[1]] == ["locked"]
    assert library.find_voice("good").transcript == "Good."
    assert library.match_voice("good")[1].transcript == "Good."
    assert library.match_voice("locked") is None


def test_a_length_given_as_text_still_reads(library):
    odd = library.save("Text length", make_voice(frames=75))
    info = json.loads((odd.folder / "meta.json").read_text())
    (odd.folder / "meta.json").write_text(json.dumps({**info, "seconds": "3.5"}))
    assert [e.seconds for e in library.entries()] == [3.5]


def test_a_crash_mid_save_leaves_nothing_behind(library, monkeypatch):
    def fail(self, folder):
        raise OSError("disk full")

    monkeypatch.setattr(Voice, "save", fail)
    with pytest.raises(StorageError):
        library.save("Ann", make_voice())
    assert list(library.root.iterdir()) == []


def test_export_import_round_trip(library, tmp_path):
    entry = library.save("Ann", make_voice(), reference=(np.zeros(2400, np.float32), 24000))
    archive = tmp_path / "ann.voicedesk.zip"
    archive.write_bytes(library.archive(entry.slug))
    other = VoiceLibrary(tmp_path / "other")
    imported = other.import_archive(archive)
    assert imported.name == "Ann" and imported.reference is not None
    assert torch.equal(other.load_voice(imported.slug).tokens, library.load_voice(entry.slug).tokens)
    with pytest.raises(LibraryError, match="already exists"):
        other.import_archive(archive)


def test_import_reads_only_known_members(library, tmp_path):
    entry = library.save("Ann", make_voice())
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("voice.safetensors", "voice.json"):
            z.write(entry.folder / name, name)
        z.writestr("../../escape.txt", "pwned")
        z.writestr("meta.json", '{"name": "Evil"}')
    imported = library.import_archive(archive)
    assert imported.name == "Evil"
    assert sorted(p.name for p in imported.folder.iterdir()) == ["meta.json", "voice.json", "voice.safetensors"]
    assert not (tmp_path / "escape.txt").exists() and not (library.root.parent / "escape.txt").exists()


@pytest.mark.parametrize("content, error", [(b"not a zip", LibraryError), (None, LibraryError),
                                            ("bad-tokens", LibraryError)])
def test_import_rejects_bad_archives(library, tmp_path, content, error):
    archive = tmp_path / "bad.zip"
    if content is None:
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("readme.txt", "no voice here")
    elif content == "bad-tokens":
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("voice.safetensors", b"\x00" * 64)
            z.writestr("voice.json", '{"format": "voicedesk-voice", "version": 1}')
    else:
        archive.write_bytes(content)
    with pytest.raises(error):
        library.import_archive(archive)
    assert library.entries() == [] and not any(library.root.iterdir())


def test_the_voices_command_lists_damaged_voices_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))
    from app.library import cli_list
    from app.storage import AppDirs

    library = VoiceLibrary.open(AppDirs.default().create())
    library.save("Fine", make_voice())
    (library.save("Hurt", make_voice(seed=1)).folder / "voice.json").write_text("{")
    assert cli_list() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Fine ") and out[1].startswith("Hurt ") and len(out) == 2
    assert "damaged: voice.safetensors or voice.json is corrupt" in out[1]


def exported(library, tmp_path, name="Ann", **members) -> Path:
    """An exported voice archive (stored, not deflated) with some members replaced."""
    entry = library.save(name, make_voice())
    archive = tmp_path / "friend's voice.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for member in ("voice.safetensors", "voice.json", "meta.json"):
            z.writestr(member, members.get(member) or (entry.folder / member).read_bytes())
    library.delete(entry.slug)
    return archive


def test_a_damaged_archive_says_so(library, tmp_path):
    archive = exported(library, tmp_path)
    data = bytearray(archive.read_bytes())
    where = data.index(b'"voicedesk-voice"')
    data[where + 1] ^= 0x20  # one flipped bit in voice.json: its CRC no longer matches
    archive.write_bytes(bytes(data))
    with pytest.raises(LibraryError, match=r"^friend's voice.zip is damaged \(voice.json in it does not read back "
                                           r"as it was written\): copy or download it again.$"):
        library.import_archive(archive)
    assert not any(library.root.iterdir())


@pytest.mark.parametrize("meta, said", [
    (b"{oops", r"voice.json in friend's voice.zip is not valid JSON \(Expecting property name enclosed in double "
               r"quotes at line 1, column 2\)."),
    (b'{"format": "voicedesk-voice", "version": 7}', r"voice.json in friend's voice.zip has version 7; this "
                                                      r"VoiceDesk reads voices of version 1."),
    (b'{"format": "voicedesk-voice"}', r"voice.json in friend's voice.zip has no version;"),
    (b'["a list"]', r"voice.json in friend's voice.zip does not describe a VoiceDesk voice"),
    (b"\xff\xfe", r"voice.json in friend's voice.zip is not text"),
    (b"[" * 100_000, r"voice.json in friend's voice.zip cannot be read \(maximum recursion depth exceeded"),
    (b'{"v": ' + b"1" * 5000 + b"}", r"voice.json in friend's voice.zip cannot be read \(Exceeds the limit"),
    (b'{"format": "voicedesk-voice", "version": 1, "rms": "loud"}',
     r"^voice.json in friend's voice.zip gives a loudness \(\"rms\"\) that is not a number of 0 or more\.$"),
    (b'{"format": "voicedesk-voice", "version": 1, "rms": -0.05}',
     r"^voice.json in friend's voice.zip gives a loudness \(\"rms\"\) that is not a number of 0 or more\.$"),
])
def test_an_invalid_voice_json_is_named_in_the_users_terms(library, tmp_path, meta, said):
    """It named the staging folder (.tmp-...) and a version the file did not have; a loudness that is no number of 0
    or more was told as voice.safetensors holding no usable voice."""
    archive = exported(library, tmp_path, **{"voice.json": meta})
    with pytest.raises(LibraryError, match=said) as caught:
        library.import_archive(archive)
    assert ".tmp-" not in str(caught.value) and str(library.root) not in str(caught.value)


def test_an_imported_display_name_is_cleaned(library, tmp_path):
    archive = exported(library, tmp_path, **{"meta.json": b'{"name": "../../../escape/..\\\\..\\\\x"}'})
    assert library.import_archive(archive).name == "escape x"


def test_delete_refuses_anything_but_a_voice_folder(library):
    """The folder check is what stops delete('../voices') from removing the whole library."""
    kept = library.save("Kept", make_voice())
    (library.root.parent / "beside").mkdir()
    for bad in ("../voices", "..", ".", "", "../beside", "/tmp", "kept/..", ".tmp-x"):
        with pytest.raises(LibraryError):
            library.delete(bad)
    assert library.root.is_dir() and (library.root.parent / "beside").is_dir()
    assert [e.slug for e in library.entries()] == [kept.slug]


def test_find_voice_ignores_case(library):
    library.save("Ann!", make_voice(transcript="The first Ann."))  # folder ann
    second = library.save("Ann?", make_voice(transcript="The second Ann.", seed=1))  # folder ann-2
    for name in ("Ann?", "ann?", "ANN?", second.slug):  # by name, not by a folder name made from it
        assert library.find_voice(name).transcript == "The second Ann."
    with pytest.raises(LibraryError):
        library.find_voice("Bob")


def test_find_voice_folds_case_as_unicode_does(library):
    """'ß' folds to 'ss', which lower-casing does not do; no folder is made from these spellings."""
    library.save("Straße", make_voice(transcript="Straße."))  # folder strae
    library.save("Fuss", make_voice(transcript="Fuss.", seed=1))  # folder fuss
    assert library.find_voice("STRASSE").transcript == "Straße."
    assert library.find_voice("FUß").transcript == "Fuss."


def test_find_voice_falls_back_to_the_folder_made_from_the_name(library):
    library.save("Ann!", make_voice(transcript="The first Ann."))  # folder ann
    library.save("Ann?", make_voice(transcript="The second Ann.", seed=1))  # folder ann-2
    assert library.find_voice("ANN-2").transcript == "The second Ann."  # slugify("ANN-2"), no name matches it
    assert library.find_voice("ann").transcript == "The first Ann."  # the folder ann; no voice is called "ann"
    with pytest.raises(LibraryError, match=r"^There is no saved voice 'ann-3'\.$"):
        library.find_voice("Ann 3")


def test_find_voice_prefers_a_name_to_a_folder_name(library):
    called_bob = library.save("Ann", make_voice(transcript="In the folder ann."))
    in_bob = library.save("Bob", make_voice(transcript="In the folder bob.", seed=1))
    named_by_hand(called_bob, "bob")
    named_by_hand(in_bob, "Robert")
    for name in ("bob", "BOB"):
        assert library.find_voice(name).transcript == "In the folder ann."
    assert library.find_voice("robert").transcript == "In the folder bob."


def test_of_names_that_differ_only_in_case_the_folder_that_sorts_last_wins(library):
    """What the name map over `entries()` gave: entries sorted by name (a stable sort, so equal names keep the
    folders' order), the later one winning. The later folder is saved first, so creation order cannot pass."""
    later = library.save("Zed", make_voice(transcript="In the folder zed."))
    earlier = library.save("Bea", make_voice(transcript="In the folder bea.", seed=1))
    named_by_hand(later, "aNN")
    named_by_hand(earlier, "Ann")  # no folder is called ann: only the name finds it
    for name in ("Ann", "ann", "aNN"):
        assert library.find_voice(name).transcript == "In the folder zed."
    torn(later)  # a damaged voice is not in entries(): the usable one of that name is found
    assert library.find_voice("ANN").transcript == "In the folder bea."


def test_a_damaged_voice_of_that_name_leaves_the_folder_made_from_the_name(library):
    damaged = library.save("Zed", make_voice(transcript="Damaged."))
    library.save("Ann", make_voice(transcript="In the folder ann.", seed=1))
    named_by_hand(library.get("ann"), "Other")
    named_by_hand(damaged, "Ann")
    torn(damaged)
    assert library.find_voice("Ann").transcript == "In the folder ann."
    with pytest.raises(LibraryError, match=r"^The saved voice 'Ann' is damaged"):
        library.find_voice("zed")  # by its folder, the damaged voice is found and refused ...
    library.delete("ann")
    with pytest.raises(LibraryError, match=r"^There is no saved voice 'ann'\.$"):
        library.find_voice("Ann")  # ... by its name, it is not found


def test_a_damaged_voice_found_is_refused_and_says_why(library):
    torn(library.save("Torn tokens", make_voice()))
    for name in ("Torn tokens", "torn TOKENS", "torn-tokens"):
        with pytest.raises(LibraryError, match=r"^The saved voice 'Torn tokens' is damaged \(voice.safetensors or "
                                               r"voice.json is corrupt\): delete it in the Voices tab\.$"):
            library.find_voice(name)


def test_damaged_voices_beside_do_not_stop_finding_a_good_one(library, monkeypatch):
    library.save("Good", make_voice(transcript="Good."))
    torn(library.save("Torn", make_voice(seed=1)))
    (library.save("Broken meta", make_voice(seed=2)).folder / "meta.json").write_text("{oops")
    (library.root / "no-files").mkdir()
    (library.root / "a-file").write_text("not a folder")
    loaded = counting_loads(monkeypatch)
    assert library.find_voice("GOOD").transcript == "Good."
    assert loaded == [library.root / "good"]  # nothing of the damaged ones was loaded


def test_a_path_for_a_name_finds_no_voice_outside_the_library(library):
    beside = VoiceLibrary(library.root.parent / "beside").save("Beside", make_voice())
    library.save("Kept", make_voice())
    for name in ("../beside", str(beside.folder), "..", ".", "/etc/passwd", "../beside/beside"):
        with pytest.raises(LibraryError, match=r"^There is no saved voice '[a-z0-9-]+'\.$"):
            library.find_voice(name)


def test_find_voice_loads_only_the_voice_it_finds(library, monkeypatch):
    for i in range(6):
        library.save(f"Voice {i}", make_voice(transcript=f"Voice {i}.", seed=i))
    loaded = counting_loads(monkeypatch)
    assert library.find_voice("VOICE 3").transcript == "Voice 3."
    assert loaded == [library.root / "voice-3"]
    assert library.find_voice("voice-5").transcript == "Voice 5."  # by its folder
    assert loaded == [library.root / "voice-3", library.root / "voice-5"]


def test_a_shortened_cell_says_it_was_cut():
    from app.ui.common import shortened

    assert shortened("short", 10) == "short" and shortened("x" * 10, 10) == "x" * 10
    cut = shortened("a rather long transcript", 10)  # 9 characters kept, the 10th an ellipsis
    assert cut == "a rather…" and len(cut) <= 10
