"""A voice's name is shown as it was typed, wherever the page names it: markup in it is neither obeyed nor
dropped (a name with '<b>' once turned the rest of the voice's details bold and hid the tag)."""
import pytest
from pages import clip_form_page, needs_chromium, upload_clip
from playwright.sync_api import expect

pytestmark = needs_chromium
NAME = "Ann <b>&amp; *two*"


@pytest.fixture
def page(running_app, browser):
    yield from clip_form_page(browser, running_app.url, 1440, 1000)


def test_a_name_with_markup_is_shown_as_typed(page, reference_wav):
    upload_clip(page, reference_wav)
    page.locator("#clone-transcript textarea").fill("A <i>buzzing</i> clip.")
    page.locator("#clone-voice-name").get_by_role("textbox").fill(NAME)
    page.locator("#clone-save").click()
    expect(page.locator("#clone-save-message")).to_contain_text(f"✓ Saved the voice '{NAME}'.", timeout=60_000)
    details = page.locator("#tab-clone .vd-saved-voice .prose").first
    expect(details).to_contain_text(NAME)
    expect(details).to_contain_text("A <i>buzzing</i> clip.")
    assert details.locator("b, em, i").count() == 0
