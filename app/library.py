"""The saved-voice library: one folder per voice, so a voice can be copied, backed up or shared by hand.

    voices/<slug>/voice.safetensors + voice.json   the Voice itself (engine/voice.py's safe format)
                  reference.wav                      the clip it was made from, to listen to again
                  meta.json                          display name, creation date, language, length

A folder is written under a temporary name and renamed into place, so a crash never leaves half a
voice. A folder that cannot be read (a file missing or corrupt) is listed apart as damaged, with what is
wrong, so the person sees it and can delete it; it never breaks the list.
"""
from __future__ import annotations

import datetime as dt
import io
import logging
import re
import shutil
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from engine.errors import AudioInputError, VoiceDeskError
from engine.fileio import saving_in
from engine.voice import META_FILE, TOKENS_FILE, Voice, VoiceMetaError

from .storage import AppDirs, atomic_write_json, read_json, write_audio

log = logging.getLogger(__name__)

REFERENCE_FILE = "reference.wav"
INFO_FILE = "meta.json"
ARCHIVE_MEMBERS = (TOKENS_FILE, META_FILE, REFERENCE_FILE, INFO_FILE)
MAX_NAME_CHARS = 60
MAX_MEMBER_BYTES = 50 * 2**20
_WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
_TMP_PREFIX = ".tmp-"
_CORRUPT = f"{TOKENS_FILE} or {META_FILE} is corrupt"  # the problem of a folder whose voice does not read back


class LibraryError(VoiceDeskError):
    """A library operation that cannot be done (bad name, unknown voice, bad archive)."""


@dataclass(frozen=True)
class VoiceEntry:
    slug: str  # folder name, the stable id
    name: str  # what the user called it
    folder: Path
    created: str  # ISO 8601, UTC
    seconds: float
    language: str | None
    transcript: str

    @property
    def reference(self) -> Path | None:
        path = self.folder / REFERENCE_FILE
        return path if path.is_file() else None


@dataclass(frozen=True)
class DamagedVoice:
    """A voice folder that cannot be used: shown in the library as damaged, so it can be deleted."""

    slug: str
    name: str  # its display name when meta.json still says it, else the folder name
    folder: Path
    problem: str  # what is wrong, for the person


def clean_name(name: str, *, what: str = "voice") -> str:
    """A display name without control characters, path parts ('/', '\\', '..') or runs of spaces; raises
    LibraryError when nothing is left (asking to name the `what`)."""
    printable = "".join(ch for ch in str(name) if not unicodedata.category(ch).startswith("C"))
    words = [part for part in re.split(r"[/\\]", printable) if part.strip() not in ("", ".", "..")]
    cleaned = " ".join(" ".join(words).split())[:MAX_NAME_CHARS].strip()
    if not cleaned and printable.strip():  # '..', '/', '. / ..'
        raise LibraryError(f"'{printable.strip()}' cannot name a {what}: '/', '\\', '.' and '..' are left out of "
                           "names, and nothing else is left. Use letters or digits.")
    if not cleaned:
        raise LibraryError(f"Give the {what} a name.")
    return cleaned


def name_key(name: str) -> str:
    """What voice names are compared and listed by: any case, as Unicode folds it ('Straße' is 'STRASSE')."""
    return name.casefold()


def requested_key(voice_id: str) -> str:
    """`name_key` of the voice a client asks for (the API, Wyoming), spaces around it ignored."""
    return name_key(voice_id.strip())


def slugify(name: str) -> str:
    """A folder name that is safe on Linux, macOS and Windows: ascii letters, digits and dashes."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:40].strip("-")
    if not slug:
        slug = "voice"
    if slug in _WINDOWS_RESERVED:
        slug += "-voice"
    return slug


class VoiceLibrary:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for stale in self.root.glob(_TMP_PREFIX + "*"):  # left by a crash mid-save
            shutil.rmtree(stale, ignore_errors=True)

    @classmethod
    def open(cls, dirs: AppDirs) -> VoiceLibrary:
        return cls(dirs.voices)

    # -- reading --------------------------------------------------------------------------------
    def scan(self) -> tuple[list[VoiceEntry], list[DamagedVoice]]:
        """The usable voices and the voice folders that cannot be used (a file missing or corrupt), each
        sorted by name, from one pass over the folder, every voice loaded to check its tokens: what the Voices tab and
        `voicedesk voices` show, where a person looks for what is damaged (`entries` lists without loading)."""
        found = sorted((self._read_entry(folder) for folder in self._voice_folders()), key=lambda e: name_key(e.name))
        return ([e for e in found if isinstance(e, VoiceEntry)], [e for e in found if isinstance(e, DamagedVoice)])

    def entries(self) -> list[VoiceEntry]:
        """Every usable voice, sorted by name, as the voice lists show them (the Clone and Studio tabs' dropdowns, the
        API's and Wyoming's voice lists): each judged by `entry`, from its small files and its tokens file's header,
        no voice loaded, so a page load reads a few hundred bytes a voice. The voices of `scan` (which loads every
        voice, for the Voices tab) but for tokens holding codes out of 0..1023, which only a file VoiceDesk did not
        write holds: such a voice is listed here and refused where it is loaded, as `entry` gives it."""
        listed = (self._read_listing(folder) for folder in self._voice_folders())
        return sorted((e for e in listed if isinstance(e, VoiceEntry)), key=lambda e: name_key(e.name))

    def read(self, slug: str) -> VoiceEntry | DamagedVoice:
        """The voice saved as `slug`, or what is wrong with its folder; LibraryError when there is none."""
        return self._read_entry(self._folder(slug))

    def get(self, slug: str) -> VoiceEntry:
        """The entry of the voice saved as `slug`, its voice loaded to check that it can be used; LibraryError when
        there is none or it is damaged. `entry` gives the entry without loading the voice."""
        return self.entry_and_voice(slug)[0]

    def entry(self, slug: str) -> VoiceEntry:
        """What is listed of the voice saved as `slug` (name, length, date, transcript, reference clip), from its
        small files (meta.json, voice.json) and its tokens file's header: its tokens are not read. LibraryError when
        there is none or those show it damaged (a file missing, meta.json unreadable, nameless or of a length that is
        no number, voice.json unreadable, of another format or version or of a loudness that is no number of 0 or
        more, the tokens file cut short or not of [8, T] integer tokens: `Voice.saved_transcript`). Codes out of
        0..1023 are told only where the voice is loaded (`get`, `load_voice`)."""
        found = self._read_listing(self._folder(slug))
        if isinstance(found, DamagedVoice):
            raise _refused(found)
        return found

    def load_voice(self, slug: str) -> Voice:
        return self.entry_and_voice(slug)[1]

    def entry_and_voice(self, slug: str) -> tuple[VoiceEntry, Voice]:
        """The entry of the voice saved as `slug` and the voice, from one reading of its folder; LibraryError when
        there is none or it is damaged."""
        return self._usable(self._folder(slug))

    def find_voice(self, name: str) -> Voice:
        """The saved voice called `name` (any case; else the one in the folder `slugify(name)`). Only the folders'
        small info files are read to find it and only its voice is loaded, so the cost of a request that names a
        voice does not grow with the library. When usable voices share the name in some case, the one whose
        folder sorts last is the one (what a name map built over `entries()` gives); damaged ones are passed over."""
        wanted = name_key(name)
        called = [folder for folder, saved_name in self._named_folders()
                  if saved_name is not None and name_key(saved_name) == wanted]
        found = self._first_usable(reversed(called))
        return found[1] if found is not None else self.load_voice(slugify(name))

    def match_voice(self, voice_id: str) -> tuple[VoiceEntry, Voice] | None:
        """The usable voice whose folder name or name is `voice_id` (any case, spaces around it ignored), and its
        entry; None when there is none; damaged voices are passed over. As in `find_voice`, only the folders' info
        files are read to find it and only the voices tried are loaded (a damaged one that matches first, then the
        one found). The rules are the API's, and differ from `find_voice`'s (a speaker's name in a script): a
        folder name matches as given, as well as a name (find_voice makes one with `slugify`, and only when no
        name matches); of several matches the first in `entries()`' order wins, by name, equal names by folder
        name (find_voice takes the last); no match is None, not an error, so the caller can try its own names."""
        wanted = requested_key(voice_id)
        matching = [(saved_name, folder) for folder, saved_name in self._named_folders()  # no name: damaged
                    if saved_name is not None and wanted in (name_key(saved_name), name_key(folder.name))]
        matching.sort(key=lambda match: name_key(match[0]))  # stable, as scan()'s sort: equal names by folder
        return self._first_usable(folder for _, folder in matching)

    def _named_folders(self) -> list[tuple[Path, str | None]]:
        """Every voice folder, usable or not, in folder-name order, with the name its info file gives (None when it
        gives none)."""
        return [(folder, _info_name(_read_info(folder))) for folder in self._voice_folders()]

    def _first_usable(self, folders: Iterable[Path]) -> tuple[VoiceEntry, Voice] | None:
        """The entry and voice of the first of `folders` that is not damaged, reading none after it; None when
        every one is damaged."""
        for folder in folders:
            found = self._read_folder(folder)
            if not isinstance(found, DamagedVoice):
                return found
        return None

    def _voice_folders(self) -> list[Path]:
        """Every voice folder, usable or not, in folder-name order (staging and hidden folders left out)."""
        return [folder for folder in sorted(self.root.iterdir()) if folder.is_dir() and not folder.name.startswith(".")]

    def _folder(self, slug: str) -> Path:
        folder = self.root / str(slug)
        if not (_is_plain_child(self.root, folder) and _is_dir(folder)):
            raise LibraryError(f"There is no saved voice '{slug}'.")
        return folder

    def _usable(self, folder: Path) -> tuple[VoiceEntry, Voice]:
        """The entry of the voice in `folder` and the voice; LibraryError when the folder is damaged."""
        found = self._read_folder(folder)
        if isinstance(found, DamagedVoice):
            raise _refused(found)
        return found

    def _read_entry(self, folder: Path) -> VoiceEntry | DamagedVoice:
        found = self._read_folder(folder)
        return found if isinstance(found, DamagedVoice) else found[0]

    def _read_folder(self, folder: Path) -> tuple[VoiceEntry, Voice] | DamagedVoice:
        """The entry of the voice in `folder` and the voice (loaded once), or what is wrong with the folder."""
        entry = self._read_listing(folder)
        if isinstance(entry, DamagedVoice):
            return entry
        try:
            voice = Voice.load(folder)  # a few kB (voice.json read again): checks the tokens, not just the names
        except AudioInputError as err:
            log.warning("%s", err)
            return _damaged(folder, entry.name, _CORRUPT)
        return entry, voice

    def _read_listing(self, folder: Path) -> VoiceEntry | DamagedVoice:
        """The entry of the voice in `folder` from its small files (meta.json, voice.json) and its tokens file's
        header, its tokens not read, or what is wrong with the folder as far as those tell."""
        info = _read_info(folder)
        saved_name = _info_name(info)
        name = _listed_name(folder, saved_name)
        missing = [n for n in (TOKENS_FILE, META_FILE, INFO_FILE) if not _is_file(folder / n)]
        if missing:
            return _damaged(folder, name, f"{', '.join(missing)} missing")
        if saved_name is None:
            return _damaged(folder, name, f"{INFO_FILE} cannot be read")
        try:
            seconds = float(info.get("seconds", 0.0))
        except (TypeError, ValueError, OverflowError):  # null, a list, "long", a 400-digit integer
            return _damaged(folder, name, f"{INFO_FILE} gives a length (\"seconds\") that is not a number")
        try:
            transcript = Voice.saved_transcript(folder)
        except AudioInputError as err:
            log.warning("%s", err)
            return _damaged(folder, name, _CORRUPT)
        return VoiceEntry(slug=folder.name, name=name, folder=folder, created=str(info.get("created", "")),
                          seconds=seconds, language=info.get("language"), transcript=transcript)

    # -- writing --------------------------------------------------------------------------------
    def save(self, name: str, voice: Voice, reference: tuple[np.ndarray, int] | None = None,
             language: str | None = None) -> VoiceEntry:
        """Add a voice under a new name. `reference` is (samples, sample_rate) of the source clip."""
        name = self.unused_name(name)
        with saving_in(self.root), self._staging() as tmp:
            voice.save(tmp)
            if reference is not None:
                samples, rate = reference
                write_audio(tmp / REFERENCE_FILE, np.asarray(samples, dtype=np.float32), int(rate))
            info = {"name": name, "created": _now(), "seconds": round(voice.seconds, 2), "language": language}
            atomic_write_json(tmp / INFO_FILE, info)
            return self._commit(tmp, name)

    def rename(self, slug: str, new_name: str) -> VoiceEntry:
        entry = self.get(slug)
        new_name = self.unused_name(new_name, allow=entry.slug)
        info = _read_info(entry.folder) or {}
        atomic_write_json(entry.folder / INFO_FILE, {**info, "name": new_name})
        if slugify(new_name) == slugify(entry.name):
            return self.get(entry.slug)
        target = free_folder(self.root, slugify(new_name))
        entry.folder.rename(target)
        return self.get(target.name)

    def delete(self, slug: str) -> str:
        """Delete a voice, damaged or not; returns the name it had."""
        entry = self.read(slug)
        shutil.rmtree(entry.folder)
        return entry.name

    def archive(self, slug: str) -> bytes:
        """A zip of the voice's folder, for sharing or backup, made in memory (no copy is kept);
        `import_archive` reads it back."""
        entry = self.get(slug)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for member in ARCHIVE_MEMBERS:
                if (entry.folder / member).is_file():
                    archive.write(entry.folder / member, member)
        return buffer.getvalue()

    def import_archive(self, path: Path, name: str | None = None) -> VoiceEntry:
        """Add a voice from an exported zip. Only the known file names are read, never paths inside it."""
        file = Path(path).name
        try:
            archive = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as err:
            raise LibraryError(f"{file} is not a VoiceDesk voice archive (.zip).") from err
        with archive, saving_in(self.root), self._staging() as tmp:
            members = {info.filename: info for info in archive.infolist()}
            if TOKENS_FILE not in members or META_FILE not in members:
                raise LibraryError(f"{file} has no {TOKENS_FILE} / {META_FILE}: not a VoiceDesk voice.")
            for member in ARCHIVE_MEMBERS:
                if member in members:
                    if members[member].file_size > MAX_MEMBER_BYTES:
                        raise LibraryError(f"{member} in {file} is too large.")
                    (tmp / member).write_bytes(_read_member(archive, member, file))
            try:
                voice = Voice.load(tmp)  # reads voice.json (its format and version), then validates the tokens
            except VoiceMetaError as err:
                raise LibraryError(f"{META_FILE} in {file} {err.problem}.") from err
            except AudioInputError as err:
                raise LibraryError(f"{TOKENS_FILE} in {file} holds no usable voice: the file is damaged or was "
                                   "not made by VoiceDesk.") from err
            _drop_unreadable_reference(tmp / REFERENCE_FILE)
            info = _read_info(tmp) or {}
            name = self.unused_name(name or str(info.get("name") or Path(path).name.split(".")[0]))
            language = info.get("language") if isinstance(info.get("language"), str) else None
            atomic_write_json(tmp / INFO_FILE, {"name": name, "created": _now(), "seconds": round(voice.seconds, 2),
                                                "language": language})
            return self._commit(tmp, name)

    # -- helpers --------------------------------------------------------------------------------
    def unused_name(self, name: str, allow: str | None = None) -> str:
        """`name` cleaned; raises LibraryError when it is empty or another voice folder than `allow` is listed under
        it (any case), damaged or not: the Voices tab lists a damaged voice too, by the name its info file gives, else
        by its folder name, and a name the person sees there is taken. Only the folders' info files are read."""
        name = clean_name(name)
        wanted = name_key(name)
        for folder, saved_name in self._named_folders():  # folder-name order: of several, the first is named
            listed = _listed_name(folder, saved_name)
            if name_key(listed) == wanted and folder.name != allow:
                raise LibraryError(f"A voice named '{listed}' already exists: pick another name.")
        return name

    def _staging(self):
        return _StagingFolder(self.root)

    def _commit(self, tmp: Path, name: str) -> VoiceEntry:
        target = free_folder(self.root, slugify(name))
        tmp.rename(target)
        return self.get(target.name)


class _StagingFolder:
    """A temporary folder inside the library, removed unless it was renamed into place."""

    def __init__(self, root: Path):
        self.path = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=root))

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def free_folder(root: Path, slug: str) -> Path:
    """`root/slug`, or `root/slug-2`, `-3` ... when that is taken."""
    candidate, n = root / slug, 2
    while candidate.exists():
        candidate, n = root / f"{slug}-{n}", n + 1
    return candidate


def _is_plain_child(root: Path, folder: Path) -> bool:
    """True when `folder` is a direct, non-hidden child of `root` (no '..', no separators)."""
    return folder.parent == root and folder.name not in ("", ".", "..") and not folder.name.startswith(".")


def _read_info(folder: Path) -> dict | None:
    """The folder's info file (display name, creation date, language, length), or None when it is missing or
    cannot be read."""
    return read_json(folder / INFO_FILE) if _is_file(folder / INFO_FILE) else None


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; False inside a folder this user may not open, where Python 3.11's Path.is_file
    raises PermissionError (so such a folder is listed as damaged instead of breaking the list)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    """Whether `path` is a folder; False for a name the file system refuses (over 255 bytes: a slug from a URL),
    where Python 3.11's Path.is_dir raises OSError (ENAMETOOLONG) instead of answering False."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _info_name(info: dict | None) -> str | None:
    """The display name an info file gives, or None when it gives none."""
    return info["name"] if info is not None and isinstance(info.get("name"), str) else None


def _damaged(folder: Path, name: str, problem: str) -> DamagedVoice:
    """The voice folder `folder`, listed under `name`, as damaged by `problem` (logged)."""
    log.warning("voice folder %s is damaged: %s", folder, problem)
    return DamagedVoice(slug=folder.name, name=name, folder=folder, problem=problem)


def _refused(voice: DamagedVoice) -> LibraryError:
    """The error of a lookup that finds `voice` damaged, saying what the person can do."""
    return LibraryError(f"The saved voice '{voice.name}' is damaged ({voice.problem}): delete it in the Voices tab.")


def _listed_name(folder: Path, saved_name: str | None) -> str:
    """The name a voice folder is listed under: the name its info file gives, else (a damaged voice) the folder's."""
    return folder.name if saved_name is None else saved_name


def _read_member(archive: zipfile.ZipFile, member: str, file: str) -> bytes:
    try:
        return archive.read(member)
    except (zipfile.BadZipFile, zlib.error, EOFError) as err:  # a bad CRC, a cut-off download
        raise LibraryError(f"{file} is damaged ({member} in it does not read back as it was written): copy or "
                           "download it again.") from err
    except (NotImplementedError, RuntimeError) as err:  # a compression method zipfile lacks, a password
        raise LibraryError(f"{member} in {file} cannot be unpacked ({err}): export the voice again from "
                           "VoiceDesk, without a password.") from err


def _drop_unreadable_reference(path: Path) -> None:
    if path.is_file():
        try:
            sf.info(str(path))
        except (sf.LibsndfileError, RuntimeError):
            log.warning("dropping unreadable %s from an imported voice", path.name)
            path.unlink()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def cli_list() -> int:
    """`voicedesk voices`: print the saved voices."""
    dirs = AppDirs.default()
    library = VoiceLibrary.open(dirs)
    entries, damaged = library.scan()
    if not entries and not damaged:
        print(f"No saved voices yet (folder: {dirs.voices}).")
        return 0
    for e in entries:
        print(f"{e.name:30s} {e.seconds:5.1f} s  {e.created[:10]}  {e.folder}")
    for d in damaged:
        print(f"{d.name:30s} damaged: {d.problem}  {d.folder}")
    return 0
