"""The page fits a laptop screen: at 1366x768 and 1920x1080, light and dark, the text box, Generate and the
result (player and status) are on the first screen of both generating tabs, and the result column stays in
view while the page is scrolled during a generation. Layout facts (boxes inside the viewport), not pixels;
screenshots go to tmp_path for a person to look at."""
import pytest
from pages import needs_chromium, open_page

pytestmark = needs_chromium
SCREENS = [(1366, 768), (1920, 1080)]
TABS = {"clone": "Clone", "design": "Voice design"}


def in_view(page, selector: str) -> bool:
    """The element's box lies inside the viewport (a collapsed box counts by its top edge)."""
    return page.evaluate("""(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }""",
                         selector)


def result_parts(prefix: str) -> list[str]:
    return [f"#{prefix}-text", f"#{prefix}-generate", f"#{prefix}-result", f"#{prefix}-status"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width, height", SCREENS)
def test_text_generate_and_result_share_the_first_screen(running_app, browser, tmp_path, width, height, scheme):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = open_page(context, running_app.url)
    try:
        assert page.evaluate("document.body.classList.contains('dark')") == (scheme == "dark")
        for prefix, name in TABS.items():
            page.get_by_role("tab", name=name, exact=True).click()
            page.wait_for_selector(f"#{prefix}-generate", state="visible")
            page.screenshot(path=str(tmp_path / f"{prefix}-{width}x{height}-{scheme}.png"))
            outside = [s for s in result_parts(prefix) if not in_view(page, s)]
            assert not outside, f"{width}x{height} {scheme}: {outside} not on the first screen"
    finally:
        context.close()


def test_the_result_stays_in_view_while_generating(running_app, browser, tmp_path):
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = open_page(context, running_app.url)
    try:
        page.get_by_role("tab", name="Voice design", exact=True).click()
        tab = page.locator("#tab-design")
        for accordion in ("Advanced settings", "Checks: right words"):  # a page taller than the screen
            tab.get_by_text(accordion).click()
        steps = tab.get_by_label("number input for Steps")
        steps.fill("4")
        steps.press("Enter")
        page.locator("#design-text textarea").fill(" ".join(f"Sentence {i} keeps the model busy." for i in range(90)))
        page.locator("#design-generate").click()
        page.wait_for_selector("#design-stop.vd-active", timeout=60_000)  # shown while it runs
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        assert page.evaluate("scrollY") > 200, "the page should be taller than the screen"
        page.wait_for_function("document.querySelector('#design-status').innerText.trim() !== ''", timeout=60_000)
        running = page.locator("#design-stop").evaluate("b => b.classList.contains('vd-active')")
        page.screenshot(path=str(tmp_path / "design-scrolled.png"))
        outside = [s for s in ("#design-result", "#design-status") if not in_view(page, s)]
        assert not outside, f"scrolled while generating: {outside} out of view"
        assert running, "the generation ended before the check: make the text longer"
        page.locator("#design-stop").click()
        page.wait_for_function("!document.querySelector('#design-stop').classList.contains('vd-active')",
                               timeout=120_000)
    finally:
        context.close()
