"""Deleting deletes: once a result or a saved voice is deleted, nothing the page was given for it (player,
downloads, export) can be fetched any more, and no copy of it stays on disk. A generation is stored once."""
import io
import time
import zipfile

import httpx
import numpy as np
import soundfile as sf
from gradio_client import Client, handle_file
from pages import needs_chromium, open_page

pytestmark = needs_chromium
MIN_PIECE = 2400  # 0.1 s: shorter runs of samples could match by chance (silence)


def stored_copies(home, samples: np.ndarray) -> list:
    """Files under `home` that hold `samples`, or a piece of them, as audio (any format soundfile reads)."""
    found = []
    for path in home.rglob("*"):
        if not path.is_file() or path.suffix.lower() not in (".wav", ".flac", ".mp3", ".ogg"):
            continue
        try:
            other, _ = sf.read(path, dtype="int16")
        except (sf.LibsndfileError, RuntimeError):
            continue
        if other.ndim == 1 and len(other) >= MIN_PIECE and _contains(samples, other):
            found.append(path)
    return found


def _contains(whole: np.ndarray, piece: np.ndarray) -> bool:
    for start in np.flatnonzero(whole[: len(whole) - len(piece) + 1] == piece[0]):
        if np.array_equal(whole[start:start + len(piece)], piece):
            return True
    return False


def urls_on(page, scope: str) -> list[str]:
    """Every address the page holds under `scope` for audio or files (players in shadow roots included)."""
    links = page.locator(f"{scope} a[href]").evaluate_all("els => els.map(a => a.href)")
    players = page.locator(f"{scope} audio").evaluate_all("els => els.map(a => a.currentSrc || a.src)")
    return [u for u in links + players if u.startswith("http")]


def delete_selected(page, tab):
    page.locator(f"#{tab}-delete").click()
    page.locator(f"#{tab}-delete-confirm").click()  # Delete asks first, on the page
    page.wait_for_function(f"document.querySelector('#{tab}-message').innerText.includes('Deleted')",
                           timeout=60_000)


def test_a_deleted_result_is_gone_everywhere(running_app, browser, reference_wav):
    client = Client(running_app.url, verbose=False)
    text = "A result that will be deleted."
    client.predict(reference=handle_file(str(reference_wav)), transcript="A buzzing clip.", text=text, steps=4,
                   randomize=False, seed=5, live_id="", api_name="/clone")
    entry = client.predict(api_name="/list_history")[0]
    assert entry["text"] == text
    samples, _ = sf.read(running_app.home / "data" / "history" / "audio" / entry["file"], dtype="int16")
    assert stored_copies(running_app.home, samples) == [running_app.home / "data" / "history" / "audio" /
                                                        entry["file"]]  # one stored copy, nothing in caches

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.get_by_role("tab", name="History").click()
    page.locator("#history-table [role=gridcell]", has_text=text).first.click()
    players = page.locator("#history-player audio")  # in a shadow root: locators reach it, querySelector not
    deadline = time.monotonic() + 30
    while not any(d > 0 for d in players.evaluate_all("els => els.map(a => a.duration || 0)")):
        assert time.monotonic() < deadline, "the replay did not load"
        time.sleep(0.2)
    urls = urls_on(page, "#tab-history")
    assert urls and all(httpx.get(u).status_code == 200 for u in urls), urls
    delete_selected(page, "history")
    context.close()

    assert {u: httpx.get(u).status_code for u in urls} == {u: 404 for u in urls}
    assert stored_copies(running_app.home, samples) == []
    assert entry["id"] not in [e["id"] for e in client.predict(api_name="/list_history")]


def test_a_deleted_voice_and_its_export_are_gone(running_app, browser, reference_wav):
    client = Client(running_app.url, verbose=False)
    client.predict(name="Voice To Delete", reference=handle_file(str(reference_wav)), transcript="A buzzing clip.",
                   api_name="/save_voice")
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.get_by_role("tab", name="Voices").click()
    page.locator("#voices-table [role=gridcell]", has_text="Voice To Delete").first.click()
    page.wait_for_function("document.querySelector('#tab-voices').innerText.includes('Export')")
    urls = urls_on(page, "#tab-voices")
    assert not list(running_app.home.rglob("*.zip")), "an export was written before anyone asked for it"
    exports = [u for u in urls if u.endswith(".zip")]
    assert exports, urls
    with zipfile.ZipFile(io.BytesIO(httpx.get(exports[0]).content)) as archive:
        assert "reference.wav" in archive.namelist()
    delete_selected(page, "voices")
    context.close()

    assert {u: httpx.get(u).status_code for u in urls} == {u: 404 for u in urls}
    assert not list(running_app.home.rglob("*.zip"))
    assert "Voice To Delete" not in [v["name"] for v in client.predict(api_name="/list_voices")]


def test_delete_asks_first_on_the_page(running_app, browser, reference_wav):
    """A browser confirm() came before the handler but could not stop it: one click deleted (dismissed or not)."""
    client = Client(running_app.url, verbose=False)
    client.predict(name="Voice To Keep", reference=handle_file(str(reference_wav)), transcript="A buzzing clip.",
                   api_name="/save_voice")
    client.predict(text="A result to keep.", steps=4, randomize=False, seed=2, live_id="", api_name="/design")
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = open_page(context, running_app.url)
    page.on("dialog", lambda dialog: dialog.dismiss())  # none is expected; if one comes, the answer is no
    for tab, row, asked in (("voices", "Voice To Keep", "Delete 'Voice To Keep'?"),
                            ("history", "A result to keep.", "Delete the result “A result to keep.”?")):
        page.get_by_role("tab", name=tab.capitalize()).click()
        page.locator(f"#{tab}-table [role=gridcell]", has_text=row).first.click()
        page.locator(f"#{tab}-delete").click()
        page.wait_for_function(f"(document.querySelector('#{tab}-confirm-question')?.innerText || '')"
                               f".includes({asked!r})", timeout=60_000)
        page.locator(f"#{tab}-delete-keep").click()
        page.wait_for_function(f"!document.querySelector('#{tab}-delete-confirm')?.checkVisibility()", timeout=30_000)
    context.close()
    assert "Voice To Keep" in [v["name"] for v in client.predict(api_name="/list_voices")]
    assert "A result to keep." in [e["text"] for e in client.predict(api_name="/list_history")]
