"""A helper model from a model hub the test runs (huggingface_hub's HF_ENDPOINT points at it), fetched by the
real huggingface_hub client in fresh processes: nothing is asked of the hub until a download is planned, the
size is known before any file comes, progress reaches the whole, only configs and one weights format come,
and once present the model is found and loaded with the network off."""
import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPO, COMMIT = "someone/tiny-speaker", "0123456789abcdef0123456789abcdef01234567"


class Hub:
    """The few hub routes a snapshot download uses: repo info, file tree, and each file (HEAD and GET)."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.requests = files, []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                hub.requests.append((self.command, self.path))
                path = self.path.split("?")[0]
                if path.startswith(f"/api/models/{REPO}/tree/"):
                    listing = [{"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                               for name, data in hub.files.items()]
                    self.reply(json.dumps(listing).encode())
                elif path.startswith(f"/api/models/{REPO}"):
                    self.reply(json.dumps({"id": REPO, "sha": COMMIT, "private": False, "siblings": [
                        {"rfilename": name, "size": len(data)} for name, data in hub.files.items()]}).encode())
                elif path.startswith(f"/{REPO}/resolve/") and path.split("/", 5)[5] in hub.files:
                    data = hub.files[path.split("/", 5)[5]]
                    self.reply(data, {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'})
                else:
                    self.reply(b"", status=404)

            do_HEAD = do_GET

            def reply(self, body: bytes, headers: dict | None = None, status: int = 200):
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fetched(self) -> set[str]:
        return {path.split("/", 5)[5] for method, path in self.requests if method == "GET" and "/resolve/" in path}


def in_a_fresh_process(code: str, hub: Hub, cache: Path, **env) -> dict:
    """Run `code` (it prints one JSON line) with the hub cache in `cache` and the hub at `hub.url`."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(cache),
                               "HF_HUB_DISABLE_TELEMETRY": "1", **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_helper_model_comes_only_when_asked_and_then_works_offline(tmp_path, tiny_speaker_model):
    files = {p.name: p.read_bytes() for p in Path(tiny_speaker_model).iterdir()}
    files |= {"README.md": b"# a model card", "tf_model.h5": b"\0" * 5000, "onnx/model.onnx": b"\0" * 5000}
    wanted = {name for name in files if name.endswith((".json", ".safetensors"))}
    hub, cache = Hub(files), tmp_path / "hub-cache"
    use = f"from engine.hub import HubModel\nimport json\nmodel = HubModel({REPO!r}, 'the voice check')\n"

    assert in_a_fresh_process(use + "print(json.dumps(model.local_folder()))", hub, cache) is None
    assert hub.requests == []  # looking for a model never asks the hub

    got = in_a_fresh_process(use + """
plan = model.download_plan()
seen = []
folder = model.download(lambda fraction, message: seen.append(fraction))
print(json.dumps({"plan": plan, "seen": seen, "folder": folder}))""", hub, cache)
    files_, size = got["plan"]
    assert set(files_) == wanted and size == sum(len(files[name]) for name in wanted)
    assert hub.fetched() == wanted  # no model card, no TensorFlow or ONNX copies
    assert got["seen"] and got["seen"] == sorted(got["seen"]) and got["seen"][-1] == 1.0
    assert {p.name for p in Path(got["folder"]).iterdir()} == wanted

    asked = len(hub.requests)
    offline = in_a_fresh_process(use + """
import numpy as np
from engine.checks.voice import SpeakerEncoder
folder = model.local_folder()
vector = SpeakerEncoder(folder).embed(np.random.default_rng(0).standard_normal(16000).astype(np.float32), 16000)
print(json.dumps({"folder": folder, "norm": float(vector.norm())}))""", hub, cache, HF_HUB_OFFLINE="1")
    assert offline["folder"] == got["folder"] and abs(offline["norm"] - 1.0) < 1e-5
    assert len(hub.requests) == asked  # found and loaded without the hub
