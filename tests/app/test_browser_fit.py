"""What a stranger saw in screenshots at 1366 and 1920 wide, light and dark, as layout facts: no table header or
number broken inside a word or cut off, '--demo' on one line and readable in the dark theme, no stray line under
the metric tiles before the first generation, the checks' slider labels on one line, and the Studio's Render all
on the first screen at 1920x1080. Screenshots go to tmp_path for a person to look at."""
import pytest
import torch
from gradio_client import Client
from pages import needs_chromium, open_page

from app.library import VoiceLibrary
from app.studio.project import Projects
from engine.voice import Voice

pytestmark = needs_chromium
SCREENS = [(1366, 768), (1920, 1080)]
LONG_TRANSCRIPT = "A transcript of the reference clip that runs on for well over eighty characters, so it is cut."

# Cells whose text is cut by its cell, or a single word broken over lines: [table, text, px past the edge, lines].
CUT_CELLS = """() => [...document.querySelectorAll('.vd-table [role=columnheader], .vd-table [role=gridcell]')]
  .filter(c => c.checkVisibility()).map(c => {
    const s = c.querySelector('span'); if (!s || !s.innerText.trim()) return null;
    const range = document.createRange(); range.selectNodeContents(s);
    const rects = [...range.getClientRects()];
    const box = (c.querySelector('.header-content') || s).getBoundingClientRect();
    const right = Math.max(...rects.map(r => r.right));
    const lines = new Set(rects.map(r => Math.round(r.top))).size;
    const oneWord = !/\\s/.test(s.innerText.trim());
    return (right > box.right + 0.5 || (oneWord && lines > 1))
      ? [c.closest('.vd-table').id, s.innerText.trim().slice(0, 25), Math.round(right - box.right), lines] : null;
  }).filter(Boolean)"""


LINES = """e => { const range = document.createRange(); range.selectNodeContents(e);
                  return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size; }"""  # of its text


# The text colour and the background it is seen on (the first ancestor's that is not transparent).
SEEN_COLOURS = """e => { const color = getComputedStyle(e).color;
    for (let at = e; at; at = at.parentElement) {
        const bg = getComputedStyle(at).backgroundColor;
        if (bg !== 'rgba(0, 0, 0, 0)' && bg !== 'transparent') return [color, bg];
    }
    return [color, 'rgb(255, 255, 255)']; }"""


def luminance(rgb: str) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (float(v) for v in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.fixture(scope="module")
def filled_app(running_app):
    """The shared app with a voice whose transcript is long, a result in the history and a Studio project."""
    library = VoiceLibrary(running_app.home / "data" / "voices")
    if "Fit Voice" not in {e.name for e in library.entries()}:
        tokens = torch.randint(0, 1024, (8, 60), generator=torch.Generator().manual_seed(7))
        library.save("Fit Voice", Voice(tokens=tokens, transcript=LONG_TRANSCRIPT, rms=0.1))
    Client(running_app.url, verbose=False).predict(text="A result for the history table.", steps=4, randomize=False,
                                                    seed=4, live_id="", api_name="/design")
    Projects(running_app.home / "data" / "studio").create("Fit", "# One\n" + "".join(
        f"Fit Voice: Line number {i} of the book.\n" for i in range(1, 4)))
    return running_app


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width, height", SCREENS)
def test_what_the_screenshots_showed(filled_app, browser, tmp_path, width, height, scheme):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = open_page(context, filled_app.url)
    try:
        code = page.locator(".vd-demo code")
        assert code.evaluate(LINES) == 1, "--demo broke across lines"
        colours = code.evaluate(SEEN_COLOURS)
        assert contrast(*colours) >= 4.5, f"--demo is hard to read: {colours}"
        assert page.locator("#tab-clone .vd-backend").inner_text().strip() == ""  # no '— ·' before a generation
        page.locator("#tab-clone").get_by_text("Checks: right words").click()
        labels = page.locator("#tab-clone .vd-checks .head label [data-testid=block-info]")
        labels.first.wait_for()
        squeezed = [label.inner_text() for label in labels.all() if label.evaluate(LINES) > 1]
        assert not squeezed, f"slider labels on more than one line: {squeezed}"
        page.screenshot(path=str(tmp_path / f"clone-{width}-{scheme}.png"))
        for tab in ("Voices", "History", "Studio"):
            page.get_by_role("tab", name=tab, exact=True).click()
            page.locator(f"#tab-{tab.lower()} .vd-table [role=gridcell]").first.wait_for(timeout=60_000)
            page.screenshot(path=str(tmp_path / f"{tab.lower()}-{width}-{scheme}.png"))
            assert page.evaluate(CUT_CELLS) == [], f"{tab} at {width}: cells cut or broken inside a word"
            if tab == "Voices":
                rows = page.locator("#voices-table [role=row]").all_inner_texts()
                assert any(LONG_TRANSCRIPT[:40] in row and "…" in row for row in rows), rows  # cut, and said so
        if (width, height) == (1920, 1080):
            page.get_by_role("tab", name="Studio", exact=True).click()
            box = page.locator("#studio-render").bounding_box()
            assert box and box["y"] + box["height"] <= height, f"Render all is below the fold: {box}"
    finally:
        context.close()
