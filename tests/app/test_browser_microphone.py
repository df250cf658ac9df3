"""A browser with no microphone is told so above the Record button (and told nothing when there is one)."""
import pytest
from conftest import CHROMIUM
from pages import needs_chromium, open_page

pytestmark = needs_chromium
NOTE = "#vd-mic-note"


@pytest.fixture(scope="module")
def mic_app(app_launcher, tmp_path_factory):
    """An app of its own: the pages opened here leave the shared app's sessions alone."""
    with app_launcher(tmp_path_factory.mktemp("mic_home")) as app:
        yield app


def test_no_microphone_is_said(mic_app):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:  # a browser of its own: the shared one has a fake microphone
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = open_page(browser.new_context(viewport={"width": 1366, "height": 768}), mic_app.url)
        page.wait_for_selector(f"{NOTE}:not([hidden])", timeout=30_000)
        assert "No microphone found" in page.locator(NOTE).inner_text()
        assert "upload a clip" in page.locator(NOTE).inner_text()
        browser.close()


def test_a_microphone_is_not_second_guessed(mic_app, browser):
    context = browser.new_context(viewport={"width": 1366, "height": 768}, permissions=["microphone"])
    page = open_page(context, mic_app.url)
    page.wait_for_selector(f"{NOTE}[data-checked]", state="attached", timeout=30_000)
    assert page.locator(NOTE).is_hidden()
    context.close()
