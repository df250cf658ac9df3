"""The History tab in a real browser, on an app whose computer is not on UTC: times are the computer's
local time, demo-model results say so, and "Use this text" puts a result's text back in the tab that made it."""
import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from gradio_client import Client, handle_file
from pages import needs_chromium, open_page

pytestmark = needs_chromium
ZONE = "Asia/Kathmandu"  # UTC+5:45: no minute of it reads like UTC
FAST = {"steps": 4, "randomize": False, "seed": 7}


@pytest.fixture(scope="module")
def app(app_launcher, tmp_path_factory, reference_wav):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", ZONE)
        with app_launcher(tmp_path_factory.mktemp("history_home")) as app:
            client = Client(app.url, verbose=False)
            client.submit(text="A designed voice said this.", **FAST, api_name="/design").result()
            client.submit(reference=handle_file(str(reference_wav)), transcript="A buzzing clip.",
                          text="A cloned voice said this.", **FAST, api_name="/clone").result()
            yield app, client.predict(api_name="/list_history")


def open_row(page, text):
    page.get_by_role("tab", name="History", exact=True).click()
    row = page.locator("#history-table [role=row]", has_text=text).first
    cells = row.locator("[role=gridcell]").all_inner_texts()
    row.locator("[role=gridcell]").nth(1).click()
    page.wait_for_function("(t) => document.querySelector('#history-reuse') && "
                           "document.querySelector('.vd-details').innerText.includes(t)", arg=text, timeout=30_000)
    return cells


@pytest.fixture
def page(app, browser):
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    yield open_page(context, app[0].url)
    context.close()


def test_local_times_and_demo_marks(app, page):
    entries = {e["text"]: e for e in app[1]}
    cells = open_row(page, "A designed voice said this.")
    created = dt.datetime.fromisoformat(entries["A designed voice said this."]["created"])
    assert cells[0].strip() == created.astimezone(ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M"), cells
    assert "demo model" in cells[3], cells
    assert "UTC" not in page.locator("#tab-history").inner_text()


@pytest.mark.parametrize("text, tab", [("A designed voice said this.", "design"),
                                       ("A cloned voice said this.", "clone")])
def test_use_this_text_fills_the_tab_that_made_it(page, text, tab):
    open_row(page, text)
    page.locator("#history-reuse").click()
    page.wait_for_function("([id, t]) => document.querySelector(`#${id}-text textarea`)?.value === t",
                           arg=[tab, text], timeout=30_000)
    assert page.locator(f"#tab-{tab}").is_visible()
