"""A saved voice whose files were damaged (a failing disk, a hand edit) stays in the Voices tab, marked
damaged with what is wrong, and can be deleted there; it is never offered for generating."""
from gradio_client import Client, handle_file
from pages import needs_chromium, open_page

pytestmark = needs_chromium


def test_a_damaged_voice_is_shown_as_damaged_and_can_be_deleted(running_app, browser, reference_wav):
    client = Client(running_app.url, verbose=False)
    slug = client.predict(name="Voice Gone Bad", reference=handle_file(str(reference_wav)),
                          transcript="A buzzing clip.", api_name="/save_voice")[0]["value"]
    folder = running_app.home / "data" / "voices" / slug
    tokens = folder / "voice.safetensors"
    tokens.write_bytes(tokens.read_bytes()[:64])  # cut short
    listed = {v["slug"]: v for v in client.predict(api_name="/list_voices")}
    assert listed[slug]["damaged"] == "voice.safetensors or voice.json is corrupt", listed[slug]

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.get_by_role("tab", name="Voices").click()
    row = page.locator("#voices-table [role=row]", has_text="Voice Gone Bad")
    row.wait_for(timeout=60_000)
    assert "⚠ Voice Gone Bad" in row.inner_text() and "damaged" in row.inner_text()
    row.locator("[role=gridcell]").first.click()
    page.wait_for_function("document.querySelector('#tab-voices').innerText.includes('is damaged')")
    details = page.locator("#tab-voices").inner_text()
    assert "Voice Gone Bad is damaged: voice.safetensors or voice.json is corrupt, so it cannot be used." in details
    page.locator("#voices-delete").click()
    page.locator("#voices-delete-confirm").click()
    page.wait_for_function("document.querySelector('#voices-message').innerText.includes(\"Deleted 'Voice Gone Bad'\")",
                           timeout=60_000)
    page.wait_for_function("!document.querySelector('#voices-table').innerText.includes('Voice Gone Bad')",
                           timeout=60_000)
    context.close()
    assert not folder.exists()
    assert slug not in [v["slug"] for v in client.predict(api_name="/list_voices")]
