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


@pytest.fixture
def settings_ctx(tmp_path):
    """An AppContext with settings and nothing else (no engine, no worker)."""
    from app.context import AppContext
    from app.settings import Settings
    from app.storage import AppDirs

    dirs = AppDirs(config=tmp_path / "config", data=tmp_path / "data", cache=tmp_path / "cache").create()
    return AppContext(dirs=dirs, settings=Settings(), library=None, history=None, worker=None, host=None,
                      speakers=None, demo=True, upload_root=dirs.uploads)


def test_concurrent_settings_saves_keep_every_change_and_revision(settings_ctx):
    """Two pages save at once (a quality switch and a Steps edit): the file ends with both changes and each save
    counts, or another open page would never be shown the second one."""
    from concurrent.futures import ThreadPoolExecutor

    from app.settings import Settings

    ctx = settings_ctx
    saves = [{"steps": 4 + i % 60} if i % 3 == 0 else {"guidance": i % 40 / 10} if i % 3 == 1
             else {"pad": i % 10 / 10} for i in range(1200)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda change: ctx.save_settings(**change), saves))
    assert ctx.settings_revision == len(saves)
    assert Settings.load(ctx.dirs.settings_file) == ctx.settings


def test_a_page_that_saves_is_still_shown_what_another_page_saved_first(settings_ctx):
    """A page's own save must not mark as seen a change another page made since this page last synced."""
    from gradio.utils import is_prop_update

    from app.ui.state import SettingsView

    ctx, view = settings_ctx, SettingsView(settings_ctx)
    view.bind("guidance", object(), save=False)
    save_steps = view._saver("steps")
    seen = ctx.settings_revision  # what this page shows
    ctx.save_settings(guidance=2.0)  # another page
    assert is_prop_update(save_steps(12, seen))  # this page keeps its revision...
    guidance_shown, revision, *_ = view._sync(seen)
    assert guidance_shown == 2.0 and revision == ctx.settings_revision  # ...and the next sync shows the change
    assert save_steps(20, revision) == revision + 1  # up to date: its own save is all there is to see


def test_a_pages_quality_switch_leaves_it_showing_the_revision_its_save_made(settings_ctx):
    """The mode is saved by the switch's own handler: like every save a page makes it must move that page's
    revision on, or the page's next sync pushes every setting back onto it, over a value being typed at that
    moment (the clean-clone CI's lost Steps edit in test_browser_state)."""
    from types import SimpleNamespace

    import gradio as gr

    from app.engine_host import HostState
    from app.realtime_check import OFF, CheckStatus
    from app.ui.state import SettingsView
    from app.ui.status import build_header, wire_header

    ctx = settings_ctx
    ctx.host = SimpleNamespace(modes_differ=lambda: False, start=lambda mode: False,  # on the CPU: nothing reloads
                               state=lambda: HostState("ready", 1.0, "FP32 eager (CPU)"),
                               realtime_check=SimpleNamespace(status=lambda: CheckStatus(OFF)))
    with gr.Blocks() as blocks:
        view = SettingsView(ctx)
        wire_header(ctx, build_header(ctx, view), [])
    switch = next(fn for fn in blocks.fns.values() if fn.api_name == "set_mode")
    assert switch.outputs[-1]._id == view.revision._id
    seen = ctx.settings_revision
    assert switch.fn("realtime", seen)[-1] == seen + 1 and ctx.settings.mode == "realtime"
    ctx.save_settings(steps=12)  # another page
    assert gr.utils.is_prop_update(switch.fn("hifi", seen + 1)[-1])  # this page has that change still to see


def test_a_sync_pushes_only_the_settings_saved_since_the_page_last_synced(settings_ctx):
    """Another page switched the quality mode: this page is sent the mode and nothing else, so a Steps value being
    typed here is not overwritten by (and then saved as) the old one."""
    from gradio.utils import is_prop_update

    from app.ui.state import SettingsView

    ctx, view = settings_ctx, SettingsView(settings_ctx)
    for name in ("mode", "steps", "guidance"):
        view.bind(name, object(), save=False)
    seen = ctx.settings_revision
    ctx.save_settings(mode="realtime")  # another page
    mode, steps, guidance, revision = view._sync(seen)
    assert mode == "realtime" and is_prop_update(steps) and is_prop_update(guidance) and revision == seen + 1
    ctx.save_settings(steps=12, guidance=1.5)  # another page again, two settings in one save
    mode, steps, guidance, _ = view._sync(revision)
    assert is_prop_update(mode) and (steps, guidance) == (12, 1.5)


def test_pages_are_served_with_the_saved_settings_and_a_loading_page_is_sent_only_what_it_shows_wrongly(
        settings_ctx):
    """A value pushed into a widget the page has not shown yet (closed accordion, other tab) is applied by Gradio
    as the widget appears, over what the user types into it then: so a page is served showing the saved settings,
    and its load pushes only a setting saved after it was served (the one it shows wrongly), nothing else."""
    import gradio as gr
    from gradio.utils import is_prop_update

    from app.ui.state import SettingsView

    ctx = settings_ctx
    with gr.Blocks() as blocks:
        view = SettingsView(ctx)
        steps = view.bind("steps", gr.Slider(4, 64, value=ctx.settings.steps, step=1))
        guidance = view.bind("guidance", gr.Slider(0, 4, value=ctx.settings.guidance))
        view.wire(blocks)

    def served(widget):
        return next(c["props"]["value"] for c in blocks.config["components"] if c["id"] == widget._id)

    ctx.save_settings(steps=12)
    assert (served(steps), served(guidance)) == (12, ctx.settings.guidance)  # a page opened now shows Steps 12
    ctx.save_settings(guidance=1.5)  # after a page was served showing Steps 12 and the old guidance
    pushed_steps, pushed_guidance, revision = view._correct(12, 3.0)  # (no timers to wake here)
    assert is_prop_update(pushed_steps) and pushed_guidance == 1.5 and revision == ctx.settings_revision
    assert all(is_prop_update(p) for p in view._correct(12, 1.5)[:2])  # a page served now: nothing to push
