"""A reference clip is read only from the folder Gradio stores uploads in: no path elsewhere, no way out
of it by `..`, a link, or a sibling folder whose name merely starts the same."""
import os
from types import SimpleNamespace

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


def page_view(view, **report):
    """A page of `view` showing the current revision in every widget, and what it reports with each request (default:
    every widget shown, none touched)."""
    from app.ui.state import _PageView

    page = _PageView([view.ctx.settings_revision] * len(view.bound))
    return page, {"shown": report.get("shown", list(range(len(view.bound)))), "touched": report.get("touched", [])}


def bind(view, *names):
    for name in names:
        view.bind(name, SimpleNamespace(elem_classes=None), save=False)


def test_a_page_that_saves_is_still_shown_what_another_page_saved_first(settings_ctx):
    """A page's own save must not mark as seen a change another page made meanwhile, nor be sent back to it."""
    from gradio.utils import is_prop_update

    from app.ui.state import SettingsView

    ctx, view = settings_ctx, SettingsView(settings_ctx)
    bind(view, "guidance", "steps")
    page, report = page_view(view)
    ctx.save_settings(guidance=2.0)  # another page
    view.saved(page, view.bound[1][1], steps=12)  # this page's Steps box
    guidance, steps = view._sync(page, report)
    assert guidance == 2.0 and is_prop_update(steps)  # the other page's change, and not its own back
    assert all(is_prop_update(sent) for sent in view._sync(page, report))  # nothing new since


def test_a_pages_quality_switch_is_not_sent_back_to_it(settings_ctx):
    """The mode is saved by the switch's own handler: like every save a page makes, it must say that the switch
    shows it, or the page's next sync sends the mode back onto the switch."""
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
    page, report = page_view(view)
    switch.fn("realtime", page)
    assert ctx.settings.mode == "realtime" and page.shows == [ctx.settings_revision]
    mode, *_ = view._sync(page, report)
    assert gr.utils.is_prop_update(mode)


def test_a_sync_sends_each_widget_only_the_settings_saved_since_it_showed_one(settings_ctx):
    """Another page switched the quality mode: this page is sent the mode and nothing else, so a Steps value being
    typed here is not overwritten by (and then saved as) the old one."""
    from gradio.utils import is_prop_update

    from app.ui.state import SettingsView

    ctx, view = settings_ctx, SettingsView(settings_ctx)
    bind(view, "mode", "steps", "guidance")
    page, report = page_view(view)
    ctx.save_settings(mode="realtime")  # another page
    mode, steps, guidance = view._sync(page, report)
    assert mode == "realtime" and is_prop_update(steps) and is_prop_update(guidance)
    ctx.save_settings(steps=12, guidance=1.5)  # another page again, two settings in one save
    mode, steps, guidance = view._sync(page, report)
    assert is_prop_update(mode) and (steps, guidance) == (12, 1.5)


def test_a_widget_is_sent_nothing_while_hidden_or_touched_and_its_setting_once_shown(settings_ctx):
    """Gradio applies a value sent to a widget the page has not shown yet as it appears, over what is typed into it
    then; and a value sent to a widget the user has just touched may be older than the edit on its way."""
    from gradio.utils import is_prop_update

    from app.ui.state import SettingsView

    ctx, view = settings_ctx, SettingsView(settings_ctx)
    bind(view, "steps", "guidance")
    page, _ = page_view(view)
    ctx.save_settings(steps=12, guidance=1.5)  # another page
    steps, guidance = view._sync(page, {"shown": [1], "touched": []})  # the Steps box not shown yet
    assert is_prop_update(steps) and guidance == 1.5
    steps, _ = view._sync(page, {"shown": [0, 1], "touched": [0]})  # shown, and touched at once
    assert is_prop_update(steps)
    steps, _ = view._sync(page, {"shown": [0, 1], "touched": []})  # untouched since: no edit, so it gets 12
    assert steps == 12


def test_pages_are_served_with_the_saved_settings_and_a_loading_page_is_sent_only_what_it_shows_wrongly(
        settings_ctx):
    """A value pushed into a widget the page has not shown yet (closed accordion, other tab) is applied by Gradio
    as the widget appears, over what the user types into it then: so a page is served showing the saved settings,
    and its load sends only a setting saved after it was served (the one it shows wrongly), nothing else."""
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
    page, report = page_view(view)
    pushed_steps, pushed_guidance = view._correct(12, 3.0, page, report)  # (no timers to wake here)
    assert is_prop_update(pushed_steps) and pushed_guidance == 1.5
    page, report = page_view(view)
    assert all(is_prop_update(p) for p in view._correct(12, 1.5, page, report))  # a page served now: nothing
    page, _ = page_view(view)
    hidden = {"shown": [0], "touched": []}
    assert all(is_prop_update(p) for p in view._correct(12, 3.0, page, hidden))  # its guidance not shown yet...
    assert view._sync(page, {"shown": [0, 1], "touched": []})[1] == 1.5  # ...until it is
