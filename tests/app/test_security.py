"""Only this computer's own page may use the app: DNS rebinding (Host check), cross-site requests
(Origin check) and clickjacking (framing headers), on the launched app and on the bare middleware."""
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.testclient import TestClient

from app.security import LocalOnlyGuard, allowed_hosts, refusal

REBOUND = "attacker.example"


def port_of(running_app) -> int:
    return urlsplit(running_app.url).port


def call(running_app, api_name, data=(), **headers) -> httpx.Response:
    """POST to a Gradio API endpoint the way a page's script would (the first half of /call)."""
    return httpx.post(f"{running_app.url}/gradio_api/call/{api_name}", json={"data": list(data)}, headers=headers)


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_loopback_names_with_the_apps_port_are_served(running_app, name):
    host = f"{name}:{port_of(running_app)}"
    assert httpx.get(running_app.url, headers={"Host": host}).status_code == 200
    assert call(running_app, "list_history", Host=host, Origin=f"http://{host}").status_code == 200


def test_dns_rebinding_is_refused(running_app):
    """A page on attacker.example whose name now resolves to 127.0.0.1: its requests name its own host,
    with a matching Origin, so the same-origin check alone lets them through."""
    host = f"{REBOUND}:{port_of(running_app)}"
    rebound = {"Host": host, "Origin": f"http://{host}"}
    assert httpx.get(running_app.url, headers=rebound).status_code == 403
    assert httpx.get(f"{running_app.url}/gradio_api/info", headers=rebound).status_code == 403
    for api_name, data in (("list_voices", ()), ("list_history", ()), ("set_mode", ("realtime",)),
                           ("delete_history", (None, 0))):
        response = call(running_app, api_name, data, **rebound)
        assert response.status_code == 403, (api_name, response.text)
    history_audio = running_app.home / "data" / "history" / "audio" / "any.wav"
    assert httpx.get(f"{running_app.url}/gradio_api/file={history_audio}", headers=rebound).status_code == 403
    # the right name on another port is another server
    assert httpx.get(running_app.url, headers={"Host": "127.0.0.1:1"}).status_code == 403


def test_other_websites_cannot_post_to_the_app(running_app, reference_wav):
    def upload(**headers):
        with reference_wav.open("rb") as f:
            return httpx.post(f"{running_app.url}/gradio_api/upload", headers=headers,
                              files={"files": ("clip.wav", f, "audio/wav")})

    assert upload(Origin="https://evil.example").status_code == 403
    assert upload(Origin=running_app.url).status_code == 200
    assert upload().status_code == 200  # API clients send no Origin


@pytest.mark.parametrize("path", ["/", "/gradio_api/info", "/gradio_api/file=/etc/passwd"])
def test_no_page_may_be_framed(running_app, path):
    response = httpx.get(f"{running_app.url}{path}")
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


async def _plain_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def guarded_status(bind_host: str, url: str, **headers) -> int:
    return TestClient(LocalOnlyGuard(_plain_app, allowed_hosts(bind_host))).get(url, headers=headers).status_code


def test_binding_elsewhere_on_purpose_accepts_that_address():
    assert guarded_status("127.0.0.1", "http://127.0.0.1:7860/") == 200
    assert guarded_status("127.0.0.1", "http://192.168.1.5:7860/") == 403
    assert guarded_status("192.168.1.5", "http://192.168.1.5:7860/") == 200
    assert guarded_status("192.168.1.5", "http://localhost:7860/") == 200
    assert guarded_status("192.168.1.5", "http://attacker.example:7860/") == 403
    assert guarded_status("0.0.0.0", "http://my-desktop.lan:7860/") == 200  # every interface: the user's choice


PORT = 7860
CROSS_SITE = "Requests from other websites are not accepted."
LOOK_ALIKES = [f"http://127.0.0.1:{PORT}.evil.example", f"http://127.0.0.1.evil.example:{PORT}",
               f"http://localhost:{PORT}@evil.example", f"http://127.0.0.1:{PORT}0", "http://127.0.0.1",
               f"https://evil.example/127.0.0.1:{PORT}", "null"]


@pytest.mark.parametrize("origin", LOOK_ALIKES)
def test_look_alike_origins_cannot_post(origin):
    headers = {"host": f"127.0.0.1:{PORT}", "origin": origin}
    assert refusal("POST", headers, PORT, allowed_hosts("127.0.0.1")) == CROSS_SITE
    assert refusal("GET", headers, PORT, allowed_hosts("127.0.0.1")) is None  # reading is what CORS guards


@pytest.mark.parametrize("host", [f"127.0.0.1:{PORT}.evil.example", f"127.0.0.1.evil.example:{PORT}",
                                  f"evil.example:{PORT}", f"localhost.:{PORT}", f"127.0.0.1:{PORT}0", "127.0.0.1:x"])
def test_look_alike_host_names_are_not_served(host):
    assert refusal("GET", {"host": host}, PORT, allowed_hosts("127.0.0.1")).startswith("This address is not served")


def test_the_apps_own_origin_may_post():
    for name in ("127.0.0.1", "localhost", "[::1]"):
        own = f"{name}:{PORT}"
        assert refusal("POST", {"host": own, "origin": f"http://{own}"}, PORT, allowed_hosts("127.0.0.1")) is None


async def _socket_app(scope, receive, send):
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": "ok"})
    await send({"type": "websocket.close", "code": 1000})


def test_websocket_upgrades_are_checked_like_the_rest():
    client = TestClient(LocalOnlyGuard(_socket_app, allowed_hosts("127.0.0.1")), base_url="http://127.0.0.1")
    own = {"host": "127.0.0.1", "origin": "http://127.0.0.1"}
    with client.websocket_connect("/queue/ws", headers=own) as ws:
        assert ws.receive_text() == "ok"  # the control: the app's own page may
    for changed in ({"host": REBOUND, "origin": f"http://{REBOUND}"}, {"origin": "https://evil.example"}):
        with pytest.raises(Exception):  # closed before it was accepted
            with client.websocket_connect("/queue/ws", headers={**own, **changed}) as ws:
                ws.receive_text()


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_cross_site_writes_of_every_method_are_refused(method):
    headers = {"host": f"127.0.0.1:{PORT}", "origin": "https://evil.example"}
    assert refusal(method, headers, PORT, allowed_hosts("127.0.0.1")) == CROSS_SITE
    client = TestClient(LocalOnlyGuard(_plain_app, allowed_hosts("127.0.0.1")), base_url=f"http://127.0.0.1:{PORT}")
    assert client.request(method, "/gradio_api/anything", headers={"origin": "https://evil.example"}).status_code == 403
    assert client.request(method, "/gradio_api/anything").status_code == 200  # no Origin: an API client


def test_a_host_without_a_port_is_port_80():
    """'Host: 127.0.0.1' names port 80: on a server listening elsewhere it is another server's name."""
    assert refusal("GET", {"host": "127.0.0.1"}, PORT, allowed_hosts("127.0.0.1")).startswith("This address is not")
    assert refusal("GET", {"host": "localhost"}, PORT, allowed_hosts("127.0.0.1")).startswith("This address is not")
    assert refusal("GET", {"host": "127.0.0.1"}, 80, allowed_hosts("127.0.0.1")) is None
