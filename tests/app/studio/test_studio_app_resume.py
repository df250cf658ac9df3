"""The launched app killed in the middle of a Studio render (SIGKILL: nothing is cleaned up) loses at most
the line being rendered: started again on the same data folder, the project reopens with every finished take
and Render renders only the lines left (through gradio_client, as any client of the app's API)."""
import json
import signal
import time

import torch
from gradio_client import Client

from app.library import VoiceLibrary
from app.studio.project import Projects
from engine.voice import Voice

LINES = 30
SCRIPT = "# Part one\n" + "".join(f"Anna: This is line number {i} of the story.\n" for i in range(1, LINES + 1))


def kept(folder) -> dict:
    """Line key -> kept take id, as the project file says now ({} while it is being replaced)."""
    try:
        lines = json.loads((folder / "project.json").read_text())["lines"]
    except (OSError, ValueError):
        return {}
    return {key: line["chosen"] for key, line in lines.items() if line["chosen"]}


def test_a_killed_app_resumes_the_render_where_it_stopped(tmp_path, app_launcher):
    home = tmp_path / "home"
    voice = Voice(tokens=torch.randint(0, 1024, (8, 60), generator=torch.Generator().manual_seed(0)),
                  transcript="A reference voice.", rms=0.1)
    VoiceLibrary(home / "data" / "voices").save("Anna", voice)
    project = Projects(home / "data" / "studio").create("Resume me", SCRIPT)

    with app_launcher(home) as app:
        Client(app.url, verbose=False).submit(project.slug, SCRIPT, "", 4, api_name="/studio_render")
        deadline = time.monotonic() + 300
        while len(kept(project.folder)) < 2:
            assert time.monotonic() < deadline, f"no line was rendered in time:\n{app.log.read_text()[-3000:]}"
            time.sleep(0.05)
        app.proc.send_signal(signal.SIGKILL)  # a crash, in the middle of the render
        app.proc.wait()
    before = kept(project.folder)
    assert 2 <= len(before) < LINES

    with app_launcher(home) as app:
        client = Client(app.url, verbose=False)
        client.predict(project.slug, SCRIPT, "", 4, api_name="/studio_render")
    after = json.loads((project.folder / "project.json").read_text())["lines"]
    assert len(after) == LINES and all(line["chosen"] for line in after.values())
    assert all(after[key]["chosen"] == take for key, take in before.items())  # finished lines kept as they were
    assert all(len(line["takes"]) == 1 for line in after.values())  # and none rendered twice
    assert not list(project.folder.rglob(".*.tmp"))  # a write cut short leaves nothing behind
