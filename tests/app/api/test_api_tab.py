"""The API tab in a real browser: it shows the address the page was opened at, the Python example it
offers to copy runs as it is (official `openai` package, launched app), and History marks the result."""
import json
import subprocess
import sys

import httpx
from pages import CHROMIUM, needs_chromium

pytestmark = needs_chromium


def test_api_tab_shows_the_endpoint_and_a_working_example(running_app, tmp_path, decode_audio):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        page.goto(running_app.url)
        page.get_by_role("tab", name="API", exact=True).click()
        expect(page.locator("#api-status")).to_contain_text(f"On at {running_app.url}/v1", timeout=30_000)
        expect(page.locator("#api-enabled input")).to_be_disabled()  # started with --api
        code = page.locator("#api-python .cm-content")
        expect(code).to_contain_text("stream_to_file", timeout=30_000)
        example = code.inner_text()
        assert f'base_url="{running_app.url}/v1"' in example
        run = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        assert len(decode_audio((tmp_path / "hello.mp3").read_bytes(), "mp3")) > 0
        # the result is in the History, marked as made through the API
        page.reload()
        page.get_by_role("tab", name="History").click()
        expect(page.locator("#history-table")).to_contain_text("via API", timeout=30_000)
        browser.close()


def test_off_by_default_and_switched_on_in_the_tab(app_launcher, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with app_launcher(tmp_path, api=False) as app:
        off = httpx.get(f"{app.url}/v1/models")
        assert off.status_code == 404 and off.json()["error"]["code"] == "api_off"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page()
            page.goto(app.url)
            page.get_by_role("tab", name="API", exact=True).click()
            expect(page.locator("#api-status")).to_contain_text("Off", timeout=30_000)
            page.locator("#api-enabled input").check()
            expect(page.locator("#api-status")).to_contain_text(f"On at {app.url}/v1", timeout=30_000)
            browser.close()
        assert httpx.get(f"{app.url}/v1/models").status_code == 200
        assert json.loads((tmp_path / "config" / "settings.json").read_text())["api"] is True  # kept for next time
