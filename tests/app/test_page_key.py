"""Off loopback the page asks for the key the API asks for: the page, Gradio's endpoints (generate, save,
import and delete voices, history), uploads and files; on the bare middleware and on the launched app."""
import os
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ROOT, free_port
from gradio_client import Client
from pages import CHROMIUM, needs_chromium
from served import CPU_ONLY
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient

from app.page_key import COOKIE, KEY_PAGE, PageKeyGuard, cookie_value

KEY = "a-key-for-the-whole-app"


async def hello(request):
    return PlainTextResponse("the app")


async def socket_hello(websocket):
    await websocket.accept()
    await websocket.send_text("the app")
    await websocket.close()


@pytest.fixture
def guarded():
    app = Starlette(routes=[Route("/{path:path}", hello, methods=["GET", "POST", "PUT", "DELETE"]),
                            WebSocketRoute("/queue/ws", socket_hello)])
    return TestClient(PageKeyGuard(app, key=KEY), follow_redirects=False)


def test_without_the_key_nothing_of_the_page_answers(guarded):
    page = guarded.get("/", headers={"Accept": "text/html,*/*"})
    assert page.status_code == 303 and page.headers["location"] == KEY_PAGE  # a person is shown the key page
    for method, path in (("GET", "/config"), ("POST", "/gradio_api/call/design"), ("POST", "/gradio_api/upload"),
                         ("DELETE", "/anything"), ("GET", "/gradio_api/file=/tmp/x.wav")):
        answer = guarded.request(method, path)
        assert answer.status_code == 401 and "the app" not in answer.text, (method, path)
    wrong = guarded.get("/config", headers={"Authorization": "Bearer wrong", "Cookie": f"{COOKIE}=guess"})
    assert wrong.status_code == 401
    with pytest.raises(Exception):  # the socket is closed before it is accepted
        with guarded.websocket_connect("/queue/ws") as ws:
            ws.receive_text()


def test_the_key_page_sets_a_cookie_that_opens_everything(guarded):
    assert 'name="key"' in guarded.get(KEY_PAGE).text
    refused = guarded.post(KEY_PAGE, data={"key": "not it"})
    assert refused.status_code == 401 and "not the key" in refused.text and COOKIE not in refused.headers.get(
        "set-cookie", "")
    accepted = guarded.post(KEY_PAGE, data={"key": KEY})
    assert accepted.status_code == 303 and accepted.headers["location"] == "/"
    cookie = accepted.headers["set-cookie"]
    assert f"{COOKIE}={cookie_value(KEY)}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert KEY not in cookie  # the browser keeps a value derived from the key, not the key
    assert guarded.get("/config").text == "the app"  # the client keeps the cookie
    with guarded.websocket_connect("/queue/ws") as ws:
        assert ws.receive_text() == "the app"


def test_scripts_send_the_key_as_a_bearer_token(guarded):
    assert guarded.post("/gradio_api/call/design", headers={"Authorization": f"Bearer {KEY}"}).text == "the app"


def test_the_openai_api_answers_its_own_401(guarded):
    assert guarded.get("/v1/models").text == "the app"  # app/api/access.py checks it, in OpenAI's shape
    assert guarded.get("/v1x").status_code == 401


@pytest.fixture(scope="module")
def network_app(tmp_path_factory):
    """The app on every interface with a key (no --api: the page alone must ask for it)."""
    home = tmp_path_factory.mktemp("network_home")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "VOICEDESK_API_KEY"}
    log = (home / "app.log").open("w")
    proc = subprocess.Popen([sys.executable, "launcher.py", "--demo", "--no-browser", "--host", "0.0.0.0", "--port",
                             str(port), "--api-key", KEY], cwd=ROOT,
                            env={**env, "VOICEDESK_HOME": str(home), **CPU_ONLY}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    try:
        while True:
            assert proc.poll() is None, (home / "app.log").read_text()
            assert time.monotonic() < deadline, "the app did not start"
            try:
                client = Client(url, verbose=False, headers={"Authorization": f"Bearer {KEY}"})
                if client.predict(api_name="/model_status")["ready"]:
                    break
            except (httpx.HTTPError, OSError, ValueError):
                pass
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_the_launched_apps_endpoints_ask_for_the_key(network_app):
    def call(api_name, data=(), **headers):
        return httpx.post(f"{network_app}/gradio_api/call/{api_name}", json={"data": list(data)}, headers=headers)

    for api_name, data in (("design", ("Hello.",)), ("list_history", ()), ("list_voices", ()),
                           ("delete_voice", ("anna", 0)), ("delete_history", (None, 0))):
        assert call(api_name, data).status_code == 401, api_name
    assert httpx.get(f"{network_app}/config").status_code == 401
    assert httpx.get(f"{network_app}/gradio_api/info").status_code == 401
    assert httpx.post(f"{network_app}/gradio_api/upload", files={"files": ("a.wav", b"RIFF")}).status_code == 401
    assert call("list_history", Authorization=f"Bearer {KEY}").status_code == 200


@needs_chromium
def test_a_person_types_the_key_once(network_app):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                    "--disable-background-networking"])
        page = browser.new_page()
        page.goto(network_app)
        assert page.url.endswith(KEY_PAGE)
        page.fill("#key", "wrong")
        page.click("button[type=submit]")
        assert "not the key" in page.inner_text("body")
        page.fill("#key", KEY)
        page.click("button[type=submit]")
        page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)  # Gradio's own calls pass
        page.reload()
        page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)  # the cookie stays
        browser.close()
