"""Atomic file writes: a crash or a full disk never leaves a half-written file behind; a write that
fails says why in words (disk full, read-only folder) and names the folder."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from soundfile import LibsndfileError

from engine.errors import StorageError

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
_NEARLY_FULL_BYTES = 1 << 20  # libsndfile reports a full disk only as "System error"


def storage_error(folder: str | Path, err: Exception) -> StorageError:
    """Why writing into `folder` failed, for the person using the app."""
    folder = Path(folder)
    code = getattr(err, "errno", None)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), folder)
    if code in _FULL or (code is None and shutil.disk_usage(existing).free < _NEARLY_FULL_BYTES):
        return StorageError(f"The disk is full: nothing more can be saved in {folder}. Free some space, then "
                            "try again.")
    if code in _READ_ONLY or not os.access(existing, os.W_OK):
        return StorageError(f"The folder {folder} is read-only: nothing can be saved there. Make it writable "
                            "(or set VOICEDESK_HOME to a folder you can write), then try again.")
    return StorageError(f"Could not save in {folder}: {getattr(err, 'strerror', None) or err}.")


@contextlib.contextmanager
def saving_in(folder: str | Path) -> Iterator[None]:
    """Turn an OSError or a libsndfile write error met while saving in `folder` into a StorageError."""
    try:
        yield
    except (OSError, LibsndfileError) as err:
        raise storage_error(folder, err) from err


def atomic_write(path: str | Path, write: Callable[[str], None]) -> None:
    """Call `write(tmp_path)` on a temporary file beside `path`, then rename it over `path`.

    Raises StorageError when the folder is full, read-only or otherwise refuses the file."""
    path = Path(path)
    with saving_in(path.parent):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            write(tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
