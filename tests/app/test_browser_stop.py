"""Stop is there only while there is something to stop, and it stops what the user hears, not only the
generation: the player falls silent at once and stays silent."""
import time

from pages import needs_chromium, open_page, stop_clicked_before_start

pytestmark = needs_chromium
# generating long after playback starts
LONG_TEXT = " ".join(f"This is sentence number {i}, and it goes on for a while." for i in range(40))
PLAYING = "() => window.voicedeskLive.isPlaying('design') && window.voicedeskLive.events.some(e => e.type === 'first')"
PLAYED = "window.voicedeskLive.taps.reduce((n, t) => n + t.samples.length, 0)"


def test_stop_is_shown_only_when_useful_and_silences_the_player(running_app, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.get_by_role("tab", name="Voice design").click()
    stop = page.locator("#design-stop")
    assert not stop.is_visible()  # nothing to stop yet

    page.locator("#design-text textarea").fill(LONG_TEXT)
    page.locator("#tab-design").get_by_text("Advanced settings").click()
    steps = page.locator("#tab-design").get_by_label("number input for Steps")
    steps.fill("32")
    steps.press("Enter")
    page.evaluate("window.voicedeskLive.tap = true")
    page.locator("#design-generate").click()
    page.wait_for_function(PLAYING, timeout=180_000)
    assert stop.is_visible()
    stop.click()
    page.wait_for_function("window.voicedeskLive.events.some(e => e.type === 'stopped')", timeout=10_000)
    played = page.evaluate(PLAYED)
    time.sleep(2)
    assert not page.evaluate(PLAYING), "the player went on after Stop"
    assert page.evaluate(PLAYED) == played, "sound was played after Stop"
    page.wait_for_function("document.querySelector('#design-status').innerText.includes('Stopped')", timeout=120_000)
    page.wait_for_function("getComputedStyle(document.querySelector('#design-stop')).display === 'none'",
                           timeout=5_000)
    context.close()


def test_a_stop_before_the_generation_began_stops_it(running_app, browser):
    """On a busy computer Stop (shown at once) may be clicked before Generate's handler has begun, so there is no job
    to cancel yet, and before the page's request for the samples has reached the app, so no listener leaves: both
    are held here until after the Stop. The generation stops as it begins, instead of running to its end unheard
    with Stop shown all along."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.get_by_role("tab", name="Voice design").click()
    page.locator("#design-text textarea").fill(LONG_TEXT)
    with stop_clicked_before_start(page, start="design-generate", stop="design-stop"):
        page.wait_for_function("document.querySelector('#design-status').innerText.includes('Stopped')",
                               timeout=120_000)
        page.wait_for_function("getComputedStyle(document.querySelector('#design-stop')).display === 'none'",
                               timeout=30_000)
        assert "Stopped after 0.0 s of audio" in page.locator("#design-status").inner_text()
    context.close()
