"""Helpers of the browser tests: Debian's Chromium, driven by Playwright."""
import shutil
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
