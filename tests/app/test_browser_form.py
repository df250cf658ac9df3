"""The Clone and Voice design forms in a real browser: no Share button that can only fail, Generate only
when there is text to speak, text over the limit kept whole and named, the language list with the common
languages first and typing that replaces "Auto", Save voice checking the name before the clip."""
import pytest
from pages import clip_form_page, needs_chromium, upload_clip

from engine.text.limits import MAX_TEXT_CHARS

pytestmark = needs_chromium


@pytest.fixture
def page(running_app, browser):
    yield from clip_form_page(browser, running_app.url, 1366, 768)


def test_a_clip_has_no_share_button(page, reference_wav):
    upload_clip(page, reference_wav)
    page.wait_for_function("document.querySelector('#clone-clip-hint').innerText.includes(' s ·')", timeout=60_000)
    toolbar = page.locator("#clone-reference")
    assert toolbar.get_by_label("Download").count() >= 1  # the toolbar is there
    assert toolbar.get_by_label("Share").count() == 0


@pytest.mark.parametrize("tab, name", [("clone", "Clone"), ("design", "Voice design")])
def test_generate_waits_for_text(page, tab, name):
    page.get_by_role("tab", name=name, exact=True).click()
    box, generate = page.locator(f"#{tab}-text textarea"), page.locator(f"#{tab}-generate")
    page.wait_for_function("(el) => el.disabled", arg=generate.element_handle(), timeout=15_000)
    box.fill("Something to say.")
    page.wait_for_function("(el) => !el.disabled", arg=generate.element_handle(), timeout=15_000)
    box.fill("   ")
    page.wait_for_function("(el) => el.disabled", arg=generate.element_handle(), timeout=15_000)


def test_text_over_the_limit_is_kept_and_named(page):
    too_long = "word " * (MAX_TEXT_CHARS // 5) + "x" * 12
    box = page.locator("#clone-text textarea")
    box.fill(too_long)
    page.wait_for_function("document.querySelector('#tab-clone').innerText.includes('over the limit')",
                           timeout=15_000)
    assert len(box.input_value()) == len(too_long)  # not cut by the browser
    assert "12 over the limit" in page.locator("#tab-clone .vd-hint", has_text="over the limit").last.inner_text()


def test_languages_common_first_and_typing_replaces_auto(page):
    box = page.locator("#clone-language input")
    assert box.input_value() == "Auto"
    box.click()
    options = page.locator("#clone-language [role=option]").all_inner_texts()[:6]
    first = [o.replace("✓", "").strip() for o in options]  # the chosen one carries a check mark
    assert first == ["Auto", "English", "Chinese", "Spanish", "French", "German"], options
    page.keyboard.type("Germ")
    assert box.input_value() == "Germ"  # not "AutoGerm"
    page.get_by_role("option", name="German", exact=True).click()
    page.wait_for_function("document.querySelector('#clone-language input').value === 'German'", timeout=10_000)
    box.click()  # back to Auto: the language is a saved setting, shared with the other tests
    page.keyboard.type("Auto")
    page.get_by_role("option", name="Auto", exact=True).click()
    page.wait_for_function("document.querySelector('#clone-language input').value === 'Auto'", timeout=10_000)


def test_save_voice_asks_for_a_name_before_the_clip(page):
    page.locator("#clone-save").click()
    page.wait_for_function("document.querySelector('#clone-save-message').innerText.includes('⚠')", timeout=30_000)
    assert "Give the voice a name" in page.locator("#clone-save-message").inner_text()  # not "record a clip first"
