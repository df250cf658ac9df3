"""Every open page shows the saved settings: a page changed in one tab shows up in another without a
reload, and a reloaded page shows what was saved, not what the app started with."""
import pytest
from pages import needs_chromium, open_page

pytestmark = needs_chromium
SYNC_TIMEOUT_MS = 15_000


@pytest.fixture
def two_pages(running_app, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    first, second = open_page(context, running_app.url), open_page(context, running_app.url)
    yield first, second
    set_settings(first, mode="High fidelity", steps=32, language="Auto")
    first.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)
    context.close()


def steps_box(page, tab):
    box = page.locator(f"#tab-{tab}").get_by_label("number input for Steps")
    if not box.is_visible():
        page.locator(f"#tab-{tab}").get_by_text("Advanced settings").click()
    return box


def set_settings(page, mode, steps, language):
    page.get_by_role("tab", name="Clone").click()
    page.locator("#vd-mode label", has_text=mode).click()
    box = steps_box(page, "clone")
    box.fill(str(steps))
    box.press("Enter")
    page.locator("#clone-language input").click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type(language)
    page.get_by_role("option", name=language, exact=True).click()


def wait_until_shown(page, mode, steps, language):
    """Both tabs' widgets show these settings (the design tab's too: one saved value, one view)."""
    page.get_by_role("tab", name="Clone").click()
    page.wait_for_function("([mode]) => [...document.querySelectorAll('#vd-mode label')].some("
                           "l => l.innerText.includes(mode) && l.querySelector('input').checked)", arg=[mode],
                           timeout=SYNC_TIMEOUT_MS)
    clone_steps = steps_box(page, "clone")
    page.wait_for_function("([el, v]) => el.value === v", arg=[clone_steps.element_handle(), str(steps)],
                           timeout=SYNC_TIMEOUT_MS)
    page.wait_for_function("([v]) => document.querySelector('#clone-language input').value === v",
                           arg=[language], timeout=SYNC_TIMEOUT_MS)
    page.get_by_role("tab", name="Voice design").click()
    assert steps_box(page, "design").input_value() == str(steps)
    assert page.locator("#design-language input").input_value() == language


def test_settings_follow_other_tabs_and_survive_a_reload(two_pages):
    first, second = two_pages
    set_settings(second, mode="Realtime", steps=12, language="English")
    wait_until_shown(first, "Realtime", 12, "English")  # no reload: the open page follows
    first.reload()
    first.wait_for_selector("#vd-model-status", timeout=60_000)
    wait_until_shown(first, "Realtime", 12, "English")
