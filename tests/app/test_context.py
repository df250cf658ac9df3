"""A reference clip is read only from the folder Gradio stores uploads in: no path elsewhere, no way out
of it by `..`, a link, or a sibling folder whose name merely starts the same."""
import os

import pytest

from app.context import checked_upload
from engine.errors import AudioInputError


@pytest.fixture
def uploads(tmp_path):
    root = tmp_path / "cache" / "gradio"
    (root / "abc123").mkdir(parents=True)
    (root / "abc123" / "clip.wav").write_bytes(b"RIFF")
    return root


def test_an_uploaded_clip_is_accepted(uploads):
    assert checked_upload(str(uploads / "abc123" / "clip.wav"), uploads) == (uploads / "abc123" / "clip.wav").resolve()


@pytest.mark.parametrize("where", ["outside", "dotdot", "sibling", "link"])
def test_paths_outside_the_upload_folder_are_refused(uploads, tmp_path, where):
    secret = tmp_path / "secret.wav"
    secret.write_bytes(b"RIFF")
    sibling = tmp_path / "cache" / "gradio_evil"  # shares the upload folder's name as a prefix
    sibling.mkdir()
    (sibling / "clip.wav").write_bytes(b"RIFF")
    link = uploads / "abc123" / "link.wav"
    os.symlink(secret, link)
    path = {"outside": secret, "dotdot": uploads / "abc123" / ".." / ".." / ".." / "secret.wav",
            "sibling": sibling / "clip.wav", "link": link}[where]
    with pytest.raises(AudioInputError, match="Only clips uploaded or recorded in the app"):
        checked_upload(str(path), uploads)


def test_nothing_or_a_missing_file_is_a_clear_error(uploads):
    with pytest.raises(AudioInputError, match="Record or upload a reference clip first"):
        checked_upload(None, uploads)
    with pytest.raises(AudioInputError, match="did not arrive"):
        checked_upload(str(uploads / "abc123" / "gone.wav"), uploads)


def test_concurrent_settings_saves_keep_every_change_and_revision(tmp_path):
    """Two pages save at once (a quality switch and a Steps edit): the file ends with both changes and each save
    counts, or another open page would never be shown the second one."""
    from concurrent.futures import ThreadPoolExecutor

    from app.context import AppContext
    from app.settings import Settings
    from app.storage import AppDirs

    dirs = AppDirs(config=tmp_path / "config", data=tmp_path / "data", cache=tmp_path / "cache").create()
    ctx = AppContext(dirs=dirs, settings=Settings(), library=None, history=None, worker=None, host=None,
                     speakers=None, demo=True, upload_root=dirs.uploads)
    saves = [{"steps": 4 + i % 60} if i % 3 == 0 else {"guidance": i % 40 / 10} if i % 3 == 1
             else {"pad": i % 10 / 10} for i in range(1200)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda change: ctx.save_settings(**change), saves))
    assert ctx.settings_revision == len(saves)
    assert Settings.load(dirs.settings_file) == ctx.settings
