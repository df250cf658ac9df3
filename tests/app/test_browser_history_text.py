"""A result's text is shown in the History tab as it was typed: a speaker's '*sighs*', a '# heading' or '<b>' in it
is neither obeyed nor dropped (they were shown as italics, a heading and bold)."""
from gradio_client import Client
from pages import needs_chromium, open_page
from playwright.sync_api import expect

pytestmark = needs_chromium
TEXT = "# Not a title *sighs* <b>bold</b> &amp; more"


def test_a_results_text_is_shown_as_typed(running_app, browser):
    Client(running_app.url, verbose=False).submit(text=TEXT, steps=4, api_name="/design").result()
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.get_by_role("tab", name="History", exact=True).click()
    page.locator("#history-table [role=row]", has_text="sighs").first.locator("[role=gridcell]").nth(1).click()
    details = page.locator("#tab-history .vd-details .prose").first
    expect(details).to_contain_text(TEXT, timeout=30_000)
    assert details.locator("h1, b, strong").count() == 0
    page.locator("#history-delete").click()
    asked = "Delete the result “# Not a title *sighs* <b>bold</b> &amp;…”?"
    expect(page.locator("#tab-history")).to_contain_text(asked)
    context.close()
