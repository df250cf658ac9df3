"""The live player (live_player.js, live_worklet.js, app/live.py) in Chromium against the launched app: what the
AudioWorklet plays is tapped there (`voicedeskLive.tap`), frame by frame on the AudioContext's clock, and compared
with the stored result. Every generation plays from its first sample, Stop silences at once and keeps what was
made, and a listener that goes away frees the GPU."""
import io

import httpx
import numpy as np
import soundfile as sf
from pages import needs_chromium, open_page

from tools.first_sound_trace import fill_form

pytestmark = needs_chromium
SHORT = "A short first clause. Then a second sentence."
LONG = " ".join(f"This is sentence number {i}, and it goes on for a while." for i in range(40))
TAPS = """(stream) => window.voicedeskLive.taps.filter(t => t.stream === stream)
    .map(t => [t.frame, Array.from(t.samples, x => Math.round(x * 32768))])"""
EVENT = "([type, stream]) => window.voicedeskLive.events.some(e => e.type === type && e.stream === stream)"
STOP_AT = """(seconds) => {  // the test presses Stop the moment the worklet has played `seconds`, reading the
    window.stopClock = null;  // audio clock as it does; the first part is longer, so sound is still queued
    const taps = window.voicedeskLive.taps, push = taps.push.bind(taps);
    taps.push = (tap) => {
        push(tap);
        if (window.stopClock === null && taps.reduce((n, t) => n + t.samples.length, 0) >= seconds * 24000) {
            window.stopClock = window.voicedeskLive.context().currentTime;
            document.querySelector('#design-stop').click();
        }
        return taps.length;
    };
}"""


def played(page, stream: int) -> tuple[list[int], np.ndarray]:
    """The frames at which the worklet played each block of `stream`, and the samples it played, in order."""
    taps = page.evaluate(TAPS, stream)
    return [frame for frame, _ in taps], np.array([x for _, block in taps for x in block], np.int16)


def wait_for(page, event: str, stream: int, timeout: int = 180_000) -> None:
    page.wait_for_function(EVENT, arg=[event, stream], timeout=timeout)


DOWNLOAD = "() => { const a = document.querySelector('#design-downloads a'); return a && a.getAttribute('href'); }"


def finished(page, url: str, before: str | None = None) -> tuple[str, np.ndarray]:
    """Once the page shows a finished result other than `before` (its download link), that link and the stored
    samples."""
    page.wait_for_function(f"(before) => {{ const href = ({DOWNLOAD})(); return href && href !== before; }}",
                           arg=before, timeout=240_000)
    href = page.evaluate(DOWNLOAD)
    answer = httpx.get(f"{url}/{href}", timeout=30)
    answer.raise_for_status()
    samples, rate = sf.read(io.BytesIO(answer.content), dtype="int16")
    assert rate == 24000
    return href, samples


def shows(page, selector: str, text: str) -> None:
    page.wait_for_function("([selector, text]) => document.querySelector(selector).innerText.includes(text)",
                           arg=[selector, text], timeout=60_000)


def design_page(browser, url, text: str, steps: int = 8):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, url)
    fill_form(page, "design", text=text, steps=steps)
    page.evaluate("window.voicedeskLive.tap = true")
    return context, page


def generate(page, text: str | None = None) -> None:
    if text is not None:
        page.locator("#design-text textarea").fill(text)
    page.locator("#design-generate").click()


def test_each_generation_plays_from_its_first_sample_exactly_as_stored(running_app, browser):
    """The issue's defect: the second result on one page started where the first had ended (2.43 s in), so its
    first sentence was never heard. Here the first plays to its end, the second is started while nothing plays,
    the third as soon as the second is made (while its last part may play): each is played whole, sample for
    sample what was stored."""
    context, page = design_page(browser, running_app.url, SHORT)
    generate(page)
    href, first = finished(page, running_app.url)
    wait_for(page, "ended", 1)
    generate(page, "The second result, two sentences long. It must be heard from its start.")
    href, _ = finished(page, running_app.url, href)  # Gradio takes no click while a generation of the page runs
    generate(page, "A third one, started as soon as the second is made.")  # takes over if the second still plays
    _, third = finished(page, running_app.url, href)
    wait_for(page, "ended", 3)
    _, heard_first = played(page, 1)
    frames, heard_third = played(page, 3)
    assert np.array_equal(heard_first, first)
    assert np.array_equal(heard_third, third)  # from sample 0 to the end, nothing skipped, nothing added
    assert frames[0] == page.evaluate("window.voicedeskLive.events.find(e => e.type === 'first' && e.stream === 3)"
                                      ".frame")
    context.close()


def test_stop_silences_within_50_ms_of_audio_clock_and_keeps_what_was_made(running_app, browser):
    context, page = design_page(browser, running_app.url, LONG)
    page.evaluate(STOP_AT, 0.1)
    generate(page)
    wait_for(page, "stopped", 1, timeout=240_000)
    stopped = page.evaluate("window.voicedeskLive.events.find(e => e.type === 'stopped')")
    assert stopped["queued"] > 0  # it was cut, not over: the sound had more to play
    _, kept = finished(page, running_app.url)
    assert "Stopped" in page.locator("#design-status").inner_text()
    taps = page.evaluate(TAPS, 1)
    heard = np.array([x for _, block in taps for x in block], np.int16)
    last_sample_s = (taps[-1][0] + len(taps[-1][1])) / 24000  # the frame after the last one played
    stop_s = page.evaluate("window.stopClock")
    print(f"Stop pressed at {stop_s:.4f} s of the audio clock; the last sample played ends at {last_sample_s:.4f} s")
    assert last_sample_s - stop_s <= 0.050
    assert len(kept) >= len(heard) and np.array_equal(kept[:len(heard)], heard)  # what was heard is kept, whole
    context.close()


def test_a_listener_that_goes_away_frees_the_gpu(running_app, browser):
    """The page's request goes away mid-stream (not Stop: the handler is not told): the route stops the
    generation at its next step, what was made is stored, and the next generation runs at once."""
    context, page = design_page(browser, running_app.url, LONG)
    generate(page)
    wait_for(page, "first", 1, timeout=240_000)
    page.evaluate("window.voicedeskLive.stop()")  # aborts the request, as a closed connection would
    href, _ = finished(page, running_app.url)
    assert "Stopped after" in page.locator("#design-status").inner_text()
    generate(page, SHORT)
    _, made = finished(page, running_app.url, href)
    wait_for(page, "ended", 2)
    assert np.array_equal(played(page, 2)[1], made)
    context.close()


def test_bad_input_gets_the_clear_error_on_the_live_request_too(running_app, browser):
    context, page = design_page(browser, running_app.url, "x " * 25_001)  # over the 50,000 characters
    generate(page)
    wait_for(page, "error", 1, timeout=60_000)
    error = page.evaluate("window.voicedeskLive.events.find(e => e.type === 'error')")
    assert error["status"] == 400 and "the limit is 50,000" in error["message"]
    shows(page, "#design-message", error["message"])  # the same words as the form's message line

    page.get_by_role("tab", name="Clone").click()
    voice = page.locator("#clone-voice input")
    voice.fill("nobody-saved-this")
    voice.press("Enter")
    page.locator("#clone-text textarea").fill(SHORT)
    page.locator("#clone-generate").click()
    wait_for(page, "error", 2, timeout=60_000)
    error = page.evaluate("window.voicedeskLive.events.filter(e => e.type === 'error')[1]")
    assert error["status"] == 404 and error["message"] == "There is no saved voice 'nobody-saved-this'."
    shows(page, "#clone-message", error["message"])

    page.get_by_role("tab", name="Voice design").click()
    generate(page, SHORT)  # nothing was left on the GPU
    wait_for(page, "ended", 3, timeout=240_000)
    context.close()


def test_a_second_tab_takes_over_at_its_first_sample_and_both_are_kept(running_app, browser):
    """Two tabs of the app: tab 1 plays a generation, tab 2 starts one. Tab 2's job waits for the GPU behind tab
    1's (one job at a time), so tab 1 keeps its sound until tab 2's first sample plays, then stops (a
    BroadcastChannel between the tabs): one sound at a time, no gap. Both generations are made whole and stored,
    neither page hangs, and the GPU is free for the next one. Tab 1's AudioContext is held (suspended) from its
    first sample until tab 2 plays, so that its sound is still queued then, as on a GPU, where a generation is
    made many times faster than it plays; on this CPU it could otherwise run dry first."""
    context, tab1 = design_page(browser, running_app.url, "Tab one speaks first. It has more to say after that.")
    tab2 = open_page(context, running_app.url)  # the same browser, as a second tab
    fill_form(tab2, "design", text=SHORT, steps=8)
    tab2.evaluate("window.voicedeskLive.tap = true")
    generate(tab1)
    wait_for(tab1, "first", 1, timeout=240_000)
    tab1.evaluate("window.voicedeskLive.context().suspend()")
    generate(tab2)
    wait_for(tab2, "first", 1, timeout=240_000)
    wait_for(tab1, "taken over", 1, timeout=30_000)
    tab1.evaluate("window.voicedeskLive.context().resume()")
    wait_for(tab1, "stopped", 1, timeout=30_000)  # the worklet let go of what was queued
    assert not tab1.evaluate("window.voicedeskLive.isPlaying('design')")
    _, made2 = finished(tab2, running_app.url)
    wait_for(tab2, "ended", 1)
    assert np.array_equal(played(tab2, 1)[1], made2)  # tab 2 heard its own, from sample 0, whole
    href1, made1 = finished(tab1, running_app.url)  # tab 1's generation went on, unheard, and is stored whole
    assert "Done" in tab1.locator("#design-status").inner_text() and len(made1) > len(played(tab1, 1)[1])
    generate(tab1, SHORT)  # nothing was left on the GPU: the next generation runs and plays
    _, made3 = finished(tab1, running_app.url, href1)
    wait_for(tab1, "ended", 2)
    assert np.array_equal(played(tab1, 2)[1], made3)
    context.close()
