"""A second Generate on the same page shows none of the first one's figures: while its voice is prepared from the
clip, the figures' tiles are empty, not the last result's first audio and real-time factor beside the new status."""
import pytest
from pages import clip_form_page, needs_chromium, upload_clip

pytestmark = needs_chromium
WATCH = """() => {  // every status the page shows with "Preparing the voice", with the figures shown beside it
    window.preparing = [];
    const status = document.querySelector('#clone-status');
    new MutationObserver(() => {
        if (status.innerText.includes('Preparing the voice'))
            window.preparing.push([...document.querySelectorAll('#tab-clone .vd-metric-value')].map(v => v.innerText));
    }).observe(document.querySelector('#tab-clone'), {subtree: true, childList: true, characterData: true});
}"""


@pytest.fixture
def page(running_app, browser):
    yield from clip_form_page(browser, running_app.url, 1440, 1000)


def test_a_second_generate_shows_no_figure_of_the_first(page, reference_wav):
    upload_clip(page, reference_wav)
    page.locator("#clone-transcript textarea").fill("A buzzing clip.")
    page.locator("#clone-text textarea").fill("Hello there.")
    page.locator("#clone-generate").click()
    page.wait_for_function("document.querySelector('#clone-status').innerText.includes('Done')", timeout=120_000)
    first = page.locator("#tab-clone .vd-metric-value").all_inner_texts()
    assert first[2] != "—"  # the real-time factor of the first result

    page.evaluate(WATCH)
    page.locator("#clone-generate").click()
    page.wait_for_function("window.preparing.length > 0", timeout=120_000)
    page.wait_for_function("document.querySelector('#clone-status').innerText.includes('Done')", timeout=120_000)
    shown = page.evaluate("window.preparing")
    assert first not in shown, shown
