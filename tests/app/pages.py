"""Helpers of the browser tests: Debian's Chromium, driven by Playwright."""
import contextlib
import shutil
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                    reason="Debian's chromium is needed (apt-get install chromium)")


def open_page(context, url: str):
    """A new page in `context` showing the app, once the model is ready and the page shows the saved settings
    (app/ui/state.py: a setting changed before then may be overwritten by the saved one)."""
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)
    page.wait_for_selector("html[data-vd-settings=shown]", state="attached", timeout=120_000)
    return page


def clip_form_page(browser, url: str, width: int, height: int):
    """(A fixture's body) a page of its own at this window size showing the app, with the Clone tab's voice set
    to a new clip (a voice saved by another test may be the last one chosen)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = open_page(context, url)
    page.locator("#clone-voice input").click()
    page.get_by_role("option", name="New voice from a clip", exact=True).click()
    yield page
    context.close()


def upload_clip(page, clip) -> None:
    """Give the Clone tab's reference box the file `clip`, as a person picking it from their files."""
    page.locator("#clone-reference").get_by_label("Upload file").click()
    page.locator("#clone-reference input[type=file]").set_input_files(str(clip))


@contextlib.contextmanager
def stop_clicked_before_start(page, *, start: str, stop: str):
    """Click the button with elem_id `start`, then `stop` while the app has neither begun `start`'s handler (its
    event in Gradio's queue is held) nor heard of the page's request for the live samples (held, never let through):
    a busy computer's order of events. Yields once the Stop's event is answered and `start`'s event let go; the
    routes are removed after the block."""
    ids = page.evaluate(f"""() => Object.fromEntries([{start!r}, {stop!r}].map(
        (name) => [name, gradio_config.components.find(c => c.props.elem_id === name).id]))""")
    held = {}

    def hold_start(route):  # Gradio's queue: the start's event is held, every other goes on
        if (route.request.post_data_json or {}).get("trigger_id") == ids[start]:
            held["start"] = route
        else:
            route.continue_()

    page.route("**/live/stream/*", lambda route: held.setdefault("samples", route))  # never reaches the app
    page.route("**/gradio_api/queue/join*", hold_start)
    try:
        page.locator(f"#{start}").click()
        deadline = time.monotonic() + 60
        while len(held) < 2:
            assert time.monotonic() < deadline, held
            page.wait_for_timeout(100)
        with page.expect_response(lambda r: "/queue/join" in r.url
                                  and (r.request.post_data_json or {}).get("trigger_id") == ids[stop]):
            page.locator(f"#{stop}").click()
        held["start"].continue_()
        yield
    finally:
        page.unroute("**/live/stream/*")
        page.unroute("**/gradio_api/queue/join*")


# Types `value` into the box labelled `label` of tab `tab` the moment it is shown, as a person's keystroke does (the
# value, then an input event), and resolves window.vdTyped. Not Playwright's fill: that lands a round trip later, at
# an arbitrary moment of the box's first frames, where Gradio may still set the props the widget was built with over
# a keystroke not yet passed on to it (render_previously_invisible_children). Typed at once, the edit goes first.
TYPE_ON_SIGHT = """([tab, label, value]) => { window.vdTyped = new Promise(typed => {
    const typeIn = () => {
        const box = document.querySelector(`#tab-${tab} input[aria-label="${label}"]`);
        if (!box || !box.checkVisibility()) return false;
        box.value = value;
        box.dispatchEvent(new Event('input', {bubbles: true}));
        return true;
    };
    if (typeIn()) return typed();
    new MutationObserver((_, watch) => { if (typeIn()) { watch.disconnect(); typed(); } })
        .observe(document.body, {childList: true, subtree: true, attributes: true});
}); }"""


def type_as_advanced_settings_open(page, tab: str, label: str, value: str) -> None:
    """Open tab `tab`'s Advanced settings and type `value` into the box labelled `label` the moment it shows."""
    page.evaluate(TYPE_ON_SIGHT, [tab, label, value])
    page.locator(f"#tab-{tab}").get_by_text("Advanced settings").click()
    page.evaluate("window.vdTyped")
