"""A failed action says why in one place, the line under its button: the fields keep what the user typed,
no "Error" badge or pop-up covers them, and the output panel returns to idle."""
import pytest
from pages import clip_form_page, needs_chromium, type_as_advanced_settings_open
from playwright.sync_api import expect

pytestmark = needs_chromium


@pytest.fixture
def page(running_app, browser):
    yield from clip_form_page(browser, running_app.url, 1440, 1000)


def wait_for_message(page, elem_id, text):
    page.wait_for_function("([id, text]) => document.querySelector('#' + id).innerText.includes(text)",
                           arg=[elem_id, text], timeout=60_000)


def assert_one_place(page):
    """No error badge on any field and no pop-up: the message line is the only place."""
    page.wait_for_timeout(500)  # a badge or a toast would have arrived with the error
    badges = page.evaluate("[...document.querySelectorAll('[data-testid=status-tracker]')]"
                           ".filter(t => !t.classList.contains('hide') && t.querySelector('.error')).length")
    assert badges == 0
    assert page.get_by_test_id("toast-body").count() == 0


def test_generate_without_a_clip_reports_under_the_button_and_the_panel_goes_idle(page):
    page.locator("#clone-text textarea").fill("Hello there.")
    page.locator("#clone-generate").click()
    wait_for_message(page, "clone-message", "reference clip")
    # not "Preparing the voice…" forever
    assert page.locator("#clone-status [data-testid=markdown]").inner_text().strip() == ""
    assert page.locator("#clone-text textarea").input_value() == "Hello there."
    assert_one_place(page)


def test_failed_save_keeps_the_fields(page):
    page.locator("#clone-transcript textarea").fill("What the clip says.")
    page.locator("#clone-voice-name").get_by_role("textbox").fill("My voice")
    page.locator("#clone-save").click()
    wait_for_message(page, "clone-save-message", "reference clip")
    assert page.locator("#clone-voice-name").get_by_role("textbox").input_value() == "My voice"
    assert page.locator("#clone-transcript textarea").input_value() == "What the clip says."
    assert_one_place(page)


def test_failed_rename_keeps_the_fields(page, running_app, reference_wav):
    from gradio_client import Client, handle_file

    client = Client(running_app.url, verbose=False)
    for name in ("Message Voice A", "Message Voice B"):
        client.predict(name=name, reference=handle_file(str(reference_wav)), transcript="A buzzing clip.",
                       api_name="/save_voice")
    page.reload()
    page.get_by_role("tab", name="Voices").click()
    page.locator("#voices-table [role=gridcell]", has_text="Message Voice A").first.click()
    name_box = page.locator("#tab-voices").get_by_label("Name", exact=True)
    # the selection's handler fills the box with the voice's name: type over it only once it has (a loaded machine
    # answers the click later than the test types, and the handler would put the old name back)
    expect(name_box).to_have_value("Message Voice A", timeout=60_000)
    name_box.fill("message voice b")
    page.locator("#tab-voices").get_by_role("button", name="Rename").click()
    wait_for_message(page, "voices-message", "already exists")
    assert name_box.input_value() == "message voice b"
    assert_one_place(page)


@pytest.mark.parametrize(("field", "typed", "said"), [
    ("Duration (s)", "-1", "Duration (s) must be from 0 to 600, not -1."),
    ("Seed", "2147483647", "Seed must be from 0 to 2147483646, not 2147483647."),
])
def test_a_value_past_a_fields_bounds_is_named_under_the_button(page, field, typed, said):
    """Typed as the Advanced settings open. Gradio's own check refused it in a pop-up naming no field ("Value -1 is
    less than minimum value 0."); and Gradio, which rendered the fields of the accordion built shut only as it opened,
    then put back the value the page was served with, over the one typed (app/assets/accordions.js)."""
    type_as_advanced_settings_open(page, "clone", field, typed)
    page.locator("#tab-clone").get_by_label("New random seed each time").set_checked(False)
    page.locator("#clone-text textarea").fill("Hello there.")
    page.locator("#clone-generate").click()
    wait_for_message(page, "clone-message", said)
    assert page.locator("#tab-clone").get_by_label(field, exact=True).input_value() == typed
    assert_one_place(page)


def test_a_second_value_past_its_bounds_is_named_too(page):
    """The first message updates the Seed box (gr.skip()), for which Gradio builds the field anew: the second value
    past its bounds got Gradio's own pop-up."""
    advanced = page.locator("#tab-clone")
    advanced.get_by_text("Advanced settings").click()
    advanced.get_by_label("Duration (s)", exact=True).fill("-1")
    advanced.get_by_label("New random seed each time").set_checked(False)
    page.locator("#clone-text textarea").fill("Hello there.")
    page.locator("#clone-generate").click()
    wait_for_message(page, "clone-message", "Duration (s) must be from 0 to 600, not -1.")
    advanced.get_by_label("Duration (s)", exact=True).fill("0")
    advanced.get_by_label("Seed", exact=True).fill("-5")
    page.locator("#clone-generate").click()
    wait_for_message(page, "clone-message", "Seed must be from 0 to 2147483646, not -5.")
    assert_one_place(page)


def test_a_setting_typed_past_its_bounds_is_named_and_not_saved(page, running_app):
    """Steps and the other settings' sliders are saved as they are typed: past their bounds, Gradio's own check
    refused the save in a pop-up naming no field ("Value 100 is greater than maximum value 64.")."""
    settings = running_app.home / "config" / "settings.json"
    before = settings.read_text() if settings.exists() else ""
    page.locator("#tab-clone").get_by_text("Advanced settings").click()
    page.locator("#tab-clone").get_by_label("number input for Steps").fill("100")
    wait_for_message(page, "clone-message", "Steps must be from 4 to 64, not 100.")
    assert_one_place(page)
    assert (settings.read_text() if settings.exists() else "") == before
