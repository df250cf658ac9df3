"""Studio projects on disk: takes stored once, the kept take, pruning, reopening, unreadable projects."""
import json

import numpy as np
import pytest

from app.library import LibraryError
from app.studio.project import PROJECT_FILE, ProjectError, Projects, line_key

RATE = 24000


def tone(seconds=0.5, freq=220.0):
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_takes_are_stored_once_and_survive_reopening(tmp_path):
    projects = Projects(tmp_path)
    project = projects.create("My  Book", "Hello.")
    assert project.name == "My Book" and project.slug == "my-book"
    first = project.add_take("k1", tone(), RATE, seed=1, render_s=0.1)
    again = project.add_take("k1", tone(), RATE, seed=1, render_s=0.2)  # the same samples
    other = project.add_take("k1", tone(freq=330), RATE, seed=2, render_s=0.1)
    assert first.id == again.id != other.id
    assert sorted(p.stem for p in project.takes_dir.iterdir()) == sorted({first.id, other.id})
    assert [t.id for t in project.takes("k1")] == [first.id, other.id]
    assert project.kept("k1").id == other.id  # a new take is kept
    project.choose("k1", first.id)

    (project.takes_dir / ".abc.flac.x1y2.tmp").write_bytes(b"half a file")  # a write cut short by a crash
    reopened = Projects(tmp_path).open(project.slug)  # the app started again
    assert not list(project.takes_dir.glob(".*.tmp"))
    assert reopened.kept("k1").id == first.id
    assert reopened.script == "Hello."
    assert np.abs(reopened.audio(reopened.kept("k1")) - tone()).max() <= 1 / 32767  # 16-bit FLAC
    with pytest.raises(ProjectError):
        reopened.choose("k1", "no-such-take")


def test_two_handlers_of_one_project_keep_each_others_takes(tmp_path):
    """Render all and a retake each opened the project: the one that saved last dropped the other's takes."""
    projects = Projects(tmp_path)
    slug = projects.create("Race").slug
    render_all, retake = projects.open(slug), projects.open(slug)
    render_all.add_take("line 2", tone(), RATE, seed=1, render_s=0.1)
    retake.set_script("Hello.", keep={"line 1", "line 2"})  # what a retake does first
    retake.add_take("line 1", tone(freq=330), RATE, seed=2, render_s=0.1)
    on_disk = Projects(tmp_path).open(slug)
    assert on_disk.kept("line 1") is not None and on_disk.kept("line 2") is not None
    assert len(list(on_disk.takes_dir.glob("*.flac"))) == 2


def test_a_project_saved_by_another_process_is_read_again(tmp_path):
    app, command_line = Projects(tmp_path), Projects(tmp_path)  # the app and `voicedesk render`
    slug = app.create("Book").slug
    shown = app.open(slug)
    command_line.open(slug).add_take("line 1", tone(), RATE, seed=1, render_s=0.1)
    assert app.open(slug) is shown and shown.kept("line 1") is not None


def test_a_new_script_prunes_takes_of_lines_that_left(tmp_path):
    project = Projects(tmp_path).create("p")
    keep = project.add_take("keep", tone(), RATE, 1, 0.1)
    gone = project.add_take("gone", tone(freq=440), RATE, 2, 0.1)
    project.set_script("edited")  # no key set: nothing is pruned
    assert project.kept("gone") is not None
    project.set_script("edited again", keep={"keep"})
    assert project.kept("gone") is None and project.kept("keep") == keep
    assert [p.stem for p in project.takes_dir.iterdir()] == [keep.id]
    assert gone.id not in json.loads((project.folder / PROJECT_FILE).read_text())


@pytest.mark.parametrize(("name", "said"), [
    ("../..", r"^'\.\./\.\.' cannot name a project: "), (" / ", "^'/' cannot name a project: "),
    ("\x00", "^Give the project a name.$")])
def test_a_name_with_nothing_left_asks_to_name_the_project(tmp_path, name, said):
    """Path parts and control characters go from a name (app/library.clean_name); when nothing is left, the message
    speaks of the project (it asked to name a voice), and of the path marks where there were some."""
    with pytest.raises(LibraryError, match=said):
        Projects(tmp_path).create(name)


def test_settings_persist(tmp_path):
    projects = Projects(tmp_path)
    project = projects.create("p")
    project.update_settings(narrator="Anna", loudness_lufs=-20.0, steps=8)
    settings = projects.open(project.slug).settings
    assert (settings.narrator, settings.loudness_lufs, settings.steps, settings.line_gap_s) == ("Anna", -20.0, 8, 0.3)


def test_listing_open_or_create_and_bad_projects(tmp_path):
    projects = Projects(tmp_path)
    a = projects.create("Alpha")
    b = projects.create("alpha")  # same folder name: a second folder
    assert b.slug == "alpha-2"
    assert projects.open_or_create("Alpha").slug == a.slug
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / PROJECT_FILE).write_text("{ not json")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / PROJECT_FILE).write_text('{"format": "something else", "name": "x"}')
    assert sorted(slug for _, slug in projects.names()) == ["alpha", "alpha-2"]
    for slug in ("broken", "other", "missing", "../alpha"):
        with pytest.raises(ProjectError):
            projects.open(slug)
    (tmp_path / "alpha" / PROJECT_FILE).write_text(json.dumps({"format": "voicedesk-studio", "version": 1,
                                                               "name": "Alpha", "lines": {"k": {"takes": [{}]}}}))
    with pytest.raises(ProjectError, match="cannot be read"):
        projects.open("alpha")
    projects.delete(b.slug)
    assert [slug for _, slug in projects.names()] == ["alpha"]  # listed; opening it says what is wrong


def test_line_keys_tell_apart_what_changes_the_sound():
    base = line_key("saved:anna", "Hi.", {}, 0)
    assert base == line_key("saved:anna", "Hi.", {}, 0)
    assert len({base, line_key("saved:bob", "Hi.", {}, 0), line_key("saved:anna", "Hi!", {}, 0),
                line_key("saved:anna", "Hi.", {"speed": 0.9}, 0), line_key("saved:anna", "Hi.", {}, 1)}) == 5


def test_a_name_taken_is_refused(tmp_path):
    """A second project of a name (as cleaned) was made beside the first: the list showed two alike, and the command
    line resumed only one of them. Another case is another name, as the command line tells them apart."""
    projects = Projects(tmp_path)
    first = projects.create("My Book", "Hello.")
    with pytest.raises(ProjectError, match="^A project named 'My Book' already exists"):
        projects.create("My  Book ")
    assert projects.names() == [("My Book", first.slug)]
    assert projects.create("my book").name == "my book"
