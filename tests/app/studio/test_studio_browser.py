"""The Studio tab in a real browser (Debian's Chromium, Playwright) on the launched demo app: import a script
with two voices and a pause, render it and hear line 1 while later lines still render, retake one line and
keep another take, export an M4B and check its chapter marks (ffprobe) and the SRT against the audio; bad
imports (an empty script, an unknown voice, a broken EPUB) are reported on the page, and a 10,000-line script
imports and lists."""
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import srt
import torch
from pages import stop_clicked_before_start
from playwright.sync_api import expect

from app.library import VoiceLibrary
from app.studio.parse import parse_script
from app.studio.plan import plan_cues
from app.studio.project import Projects
from engine.voice import Voice

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists() or shutil.which("ffprobe") is None,
                                reason="Debian's chromium and ffmpeg are needed")

SCRIPT = """\
# Chapter one
Anna: The first line, from Anna.
Bob: And the second, from Bob.
[pause 1s]
Anna: A third line, after a pause.

## Chapter two
Bob: The fourth line.
Anna: The last line of the book.
"""
LINES = 5


@pytest.fixture(scope="module")
def page(running_app, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    library = VoiceLibrary(running_app.home / "data" / "voices")
    for seed, name in enumerate(("Anna", "Bob")):  # random codec tokens: the demo model takes any voice
        tokens = torch.randint(0, 1024, (8, 60), generator=torch.Generator().manual_seed(seed))
        if name not in {e.name for e in library.entries()}:
            library.save(name, Voice(tokens=tokens, transcript=f"I am {name}.", rms=0.1))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--autoplay-policy=no-user-gesture-required"])
        page = browser.new_page(viewport={"width": 1440, "height": 1100})
        page.goto(running_app.url)
        page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)
        page.get_by_role("tab", name="Studio").click()
        yield page
        browser.close()


def progress(page) -> dict:
    return page.evaluate("""() => { const p = document.querySelector('#studio-progress .vd-studio-progress');
        return {state: p.dataset.state, done: +p.dataset.done, total: +p.dataset.total}; }""")


ROWS_JS = """[...document.querySelectorAll('#studio-lines [role=row]')]
               .map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()))
               .filter(cells => cells.length)"""


def states(page) -> list[str]:
    return page.evaluate(f"{ROWS_JS}.map(cells => cells[4])")


def test_import_render_retake_export(page, running_app, tmp_path):
    script_file = tmp_path / "two-voices.md"
    script_file.write_text(SCRIPT, encoding="utf-8")
    with page.expect_file_chooser() as chooser:
        page.locator("#studio-import").click()
    chooser.value.set_files(str(script_file))
    page.wait_for_function(f"{ROWS_JS}.length === {LINES}", timeout=60_000)
    assert states(page) == ["queued"] * LINES
    assert page.locator("#studio-project input").input_value() == "two-voices"
    steps = page.locator("#studio-steps input[type=number]")
    steps.fill("4")
    steps.press("Enter")

    page.locator("#studio-render").click()
    # Line 1 plays while later lines are still rendering (the live player's first sample).
    page.wait_for_function("window.voicedeskLive.events.some(e => e.type === 'first')", timeout=180_000)
    heard_at = progress(page)
    assert heard_at["state"] == "rendering" and heard_at["done"] < LINES, heard_at
    page.wait_for_function("document.querySelector('#studio-progress .vd-studio-progress').dataset.state === 'done'",
                           timeout=300_000)
    assert progress(page)["done"] == LINES
    page.wait_for_function(f"{ROWS_JS}.every(cells => cells[4] === 'done')", timeout=30_000)

    # Retake line 2, then keep its first take again.
    page.locator("#studio-lines [role=gridcell]", has_text="And the second, from Bob.").first.click()
    page.wait_for_selector("#studio-takes label", timeout=30_000)
    assert page.locator("#studio-takes label").count() == 1
    page.locator("#studio-retake").click()
    page.wait_for_function("document.querySelectorAll('#studio-takes label').length === 2", timeout=180_000)
    first_take = page.locator("#studio-takes label").first
    first_take.click()
    page.wait_for_function("document.querySelector('#studio-takes input:checked') !== null", timeout=30_000)
    [project_json] = [p for p in (running_app.home / "data" / "studio").glob("*/project.json")
                      if json.loads(p.read_text())["name"] == "two-voices"]
    lines = json.loads(project_json.read_text())["lines"]
    retaken = [v for v in lines.values() if len(v["takes"]) == 2]
    deadline = time.monotonic() + 30
    while not (len(retaken) == 1 and retaken[0]["chosen"] == retaken[0]["takes"][0]["id"]):
        assert time.monotonic() < deadline, "the first take was not kept"
        time.sleep(0.2)
        retaken = [v for v in json.loads(project_json.read_text())["lines"].values() if len(v["takes"]) == 2]

    # Export an M4B with chapters and an SRT.
    page.locator("#studio-export").click()
    page.wait_for_function("document.querySelectorAll('#studio-files a').length >= 2", timeout=120_000)
    exports = running_app.home / "cache" / "exports" / "studio" / project_json.parent.name
    book = exports / f"{project_json.parent.name}.m4b"
    probe = json.loads(subprocess.run(["ffprobe", "-v", "error", "-of", "json", "-show_chapters", "-show_entries",
                                       "format=duration", str(book)], capture_output=True, text=True,
                                      check=True).stdout)
    assert [c["tags"]["title"] for c in probe["chapters"]] == ["Chapter one", "Chapter two"]
    cues = list(srt.parse(book.with_suffix(".srt").read_text(encoding="utf-8")))
    assert [c.content for c in cues] == ["The first line, from Anna.", "And the second, from Bob.",
                                         "A third line, after a pause.", "The fourth line.",
                                         "The last line of the book."]
    assert float(probe["chapters"][1]["start_time"]) == pytest.approx(cues[3].start.total_seconds(), abs=2e-3)
    gaps = [(b.start - a.end).total_seconds() for a, b in zip(cues, cues[1:])]
    assert gaps == pytest.approx([0.3, 1.0, 2.0, 0.3], abs=2e-3)  # line gap, the pause, chapter end, line gap

    # The SRT against the audio itself: speech inside each cue, silence in the pause.
    pcm = subprocess.run(["ffmpeg", "-v", "error", "-i", str(book), "-f", "f32le", "-ac", "1", "-ar", "24000", "-"],
                         capture_output=True, check=True).stdout
    audio = np.frombuffer(pcm, np.float32)
    rms = lambda a, b: float(np.sqrt(np.mean(audio[int(a * 24000):int(b * 24000)] ** 2)))  # noqa: E731
    for cue in cues:
        assert rms(cue.start.total_seconds(), cue.end.total_seconds()) > 0.01, cue
    pause = (cues[1].end.total_seconds() + 0.05, cues[2].start.total_seconds() - 0.05)
    assert rms(*pause) < 0.01 * rms(cues[1].start.total_seconds(), cues[1].end.total_seconds())
    assert float(probe["format"]["duration"]) == pytest.approx(cues[-1].end.total_seconds() + 2.0, abs=0.1)


def import_into_new_project(page, name: str, path: Path) -> None:
    """Create the project `name`, then import `path` into it through the page's file chooser."""
    page.locator("#studio-new-name").get_by_role("textbox").fill(name)
    page.locator("#studio-create").click()
    page.wait_for_function(f"document.querySelector('#studio-project input').value === {json.dumps(name)}",
                           timeout=60_000)
    with page.expect_file_chooser() as chooser:
        page.locator("#studio-import").click()
    chooser.value.set_files(str(path))


def shown(page, elem_id: str, words: str, timeout: int = 60_000) -> str:
    """Wait until the element `elem_id` says `words`; returns its text."""
    page.wait_for_function(f"(document.querySelector('#{elem_id}')?.innerText || '').includes({json.dumps(words)})",
                           timeout=timeout)
    return page.locator(f"#{elem_id}").inner_text()


@pytest.mark.parametrize("name, content, where, words", [
    ("empty.md", "\n<!-- nothing yet -->\n", "studio-problems", "The script is empty"),
    ("cast.md", "Anna: Hi.\nZed: Who?\n", "studio-problems", "line 2: there is no saved voice 'Zed'"),
    ("book.epub", "not a zip file", "studio-project-message", "is not a readable EPUB book"),
])
def test_bad_inputs_are_reported_before_anything_renders(page, running_app, tmp_path, name, content, where, words):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    project = f"bad {Path(name).stem}"
    import_into_new_project(page, project, path)
    shown(page, where, words)
    assert page.evaluate(f"{ROWS_JS}.length") == 0  # no line is listed, so none can render
    shown(page, "studio-problems", "Fix the script first" if where == "studio-problems" else "The script is empty")
    [folder] = [p.parent for p in (running_app.home / "data" / "studio").glob("*/project.json")
                if json.loads(p.read_text())["name"] == project]
    assert not list(folder.glob("takes/*"))


def test_ten_thousand_lines_import_and_list(page, running_app, tmp_path):
    path = tmp_path / "long.md"
    path.write_text("# The long chapter\n" + "".join(f"Anna: Line number {i}.\n" for i in range(1, 10_001)),
                    encoding="utf-8")
    import_into_new_project(page, "ten thousand", path)
    shown(page, "studio-project-message", "✓ Imported long.md", timeout=120_000)
    page.wait_for_function(f"{ROWS_JS}.length > 0", timeout=120_000)
    assert page.locator("#studio-problems").inner_text().strip() == ""
    first = page.evaluate(f"{ROWS_JS}[0]")
    assert first[:5] == ["2", "The long chapter", "Anna", "Line number 1.", "queued"]
    [project_json] = [p for p in (running_app.home / "data" / "studio").glob("*/project.json")
                      if json.loads(p.read_text())["name"] == "ten thousand"]
    assert json.loads(project_json.read_text())["script"].count("\n") == 10_001


def test_checked_render_shows_each_lines_badge(page, running_app, tmp_path):
    """Take checks on (best of 2, set the way an API client does: gradio_client's /set_checks): each rendered
    line's Checks cell shows its verdict, and its takes list the kept take's badge as stored in the project."""
    from gradio_client import Client

    client = Client(running_app.url, verbose=False)
    assert client.predict("best_of_n", 2, api_name="/set_checks")["candidates"] == 2
    try:
        path = tmp_path / "checked.md"
        path.write_text("Anna: A checked line for the Studio.\nBob: And a second one.\n", encoding="utf-8")
        import_into_new_project(page, "checked", path)
        page.wait_for_function(f"{ROWS_JS}.length === 2", timeout=60_000)
        steps = page.locator("#studio-steps input[type=number]")
        steps.fill("4")
        steps.press("Enter")
        page.locator("#studio-render").click()
        page.wait_for_function(f"{ROWS_JS}.every(cells => cells[4] === 'done')", timeout=300_000)
    finally:
        client.predict("off", api_name="/set_checks")  # leave the checks off for whatever runs next
    cells = page.evaluate(f"{ROWS_JS}.map(cells => cells[7])")
    assert all(re.fullmatch(r"ok|[a-z, ]+ ok; [a-z, ]+ not checked|\d+/\d+ failed: .+", c) for c in cells), cells

    [project_json] = [p for p in (running_app.home / "data" / "studio").glob("*/project.json")
                      if json.loads(p.read_text())["name"] == "checked"]
    line = next(v for v in json.loads(project_json.read_text())["lines"].values())
    kept = next(t for t in line["takes"] if t["id"] == line["chosen"])
    assert kept["checks"]["attempts"] == 2
    page.locator("#studio-lines [role=gridcell]", has_text="A checked line for the Studio.").first.click()
    # the takes radio still shows the line an earlier test selected until this selection arrives: wait for it
    expect(page.locator("#studio-takes label").first).to_contain_text(kept["checks"]["badge"], timeout=30_000)


def test_a_retake_during_render_all_leaves_the_render_going(page, running_app, tmp_path):
    """A new take of a finished line while Render all runs: the render went on to none of the lines after it
    ("1 of 1 lines rendered", the rest left queued) and the export then failed."""
    count = 6
    path = tmp_path / "race.md"
    path.write_text("".join(f"Anna: Racing line number {i}.\n" for i in range(1, count + 1)), encoding="utf-8")
    import_into_new_project(page, "race", path)
    page.wait_for_function(f"{ROWS_JS}.length === {count}", timeout=60_000)
    # the line an earlier test selected (another project's) is no longer shown, nor its Retake
    expect(page.locator("#studio-retake")).to_be_hidden(timeout=30_000)
    steps = page.locator("#studio-steps input[type=number]")
    steps.fill("4")
    steps.press("Enter")
    page.locator("#studio-render").click()
    page.wait_for_function(f"{ROWS_JS}[0][4] === 'done'", timeout=180_000)
    page.locator("#studio-lines [role=gridcell]", has_text="Racing line number 1.").first.click()
    # Retake renders the line the page has selected: wait until this selection has arrived
    expect(page.locator("#studio-line-info")).to_contain_text("Racing line number 1.", timeout=30_000)
    page.locator("#studio-retake").click()
    [project_json] = [p for p in (running_app.home / "data" / "studio").glob("*/project.json")
                      if json.loads(p.read_text())["name"] == "race"]

    def takes() -> list[int]:
        try:
            return [len(line["takes"]) for line in json.loads(project_json.read_text())["lines"].values()]
        except ValueError:  # being replaced
            return []

    deadline = time.monotonic() + 300
    while not (len(takes()) == count and all(takes()) and sum(takes()) == count + 1):
        assert time.monotonic() < deadline, f"the render stopped: takes per line {takes()}"
        time.sleep(0.5)
    page.wait_for_function(f"{ROWS_JS}.every(cells => cells[4] === 'done')", timeout=60_000)
    # the box shows whichever of the two handlers finished last (Render all's 6 of 6 or the retake's 1 of 1):
    # either way nothing is left queued or stopped
    page.wait_for_function("""() => { const p = document.querySelector('#studio-progress .vd-studio-progress');
        return p.dataset.state === 'done' && p.dataset.done === p.dataset.total; }""", timeout=60_000)
    assert progress(page)["total"] in (1, count)


def test_a_stop_before_the_render_began_stops_it(page, tmp_path):
    """On a busy computer Stop may be clicked before Render all's handler has begun (no job to cancel yet) and before
    the page's request for the lines' sound has reached the app (no listener to leave): both are held here until
    after the Stop. The render stops as it begins instead of rendering every line."""
    path = tmp_path / "stopped.md"
    path.write_text("".join(f"Anna: Stopped line number {i}.\n" for i in range(1, 5)), encoding="utf-8")
    import_into_new_project(page, "stopped", path)
    page.wait_for_function(f"{ROWS_JS}.length === 4", timeout=60_000)
    with stop_clicked_before_start(page, start="studio-render", stop="studio-stop"):
        # the box still shows an earlier test's render until this one's (4 lines) has ended
        page.wait_for_function("""() => { const p = document.querySelector('#studio-progress .vd-studio-progress');
            return ['stopped', 'done'].includes(p.dataset.state) && p.dataset.total === '4'; }""", timeout=180_000)
        assert progress(page)["state"] == "stopped", progress(page)
        assert "done" not in states(page), states(page)


def test_a_project_and_a_line_are_shown_as_typed(page, tmp_path):
    """Markup in a project's name or a line's text is neither obeyed nor dropped (they were shown as italics)."""
    path = tmp_path / "marks.txt"
    path.write_text("Anna: She *sighs* <b>twice</b> &amp; waits.\n", encoding="utf-8")
    page.locator("#studio-new-name").get_by_role("textbox").fill("A *starred* <b> book")
    page.locator("#studio-create").click()
    shown(page, "studio-project-message", "✓ Created 'A *starred* <b> book'.")
    with page.expect_file_chooser() as chooser:
        page.locator("#studio-import").click()
    chooser.value.set_files(str(path))
    page.wait_for_function(f"{ROWS_JS}.length === 1", timeout=60_000)
    page.locator("#studio-lines [role=gridcell]", has_text="sighs").first.click()
    expect(page.locator("#studio-line-info")).to_contain_text("She *sighs* <b>twice</b> &amp; waits.", timeout=30_000)
    assert page.locator("#studio-line-info").locator("em, b").count() == 0


def reopened(page) -> None:
    """Load the page again (it opens the newest project) and show the Studio."""
    page.reload()
    page.wait_for_selector("#vd-model-status[data-stage=ready]", timeout=120_000)
    page.get_by_role("tab", name="Studio").click()


def test_the_created_message_stays_and_a_name_taken_is_said(page, running_app):
    """Create said '✓ Created ...' only until the new project opened (opening it cleared the message); a second Create
    of that name is refused on the page, and the list keeps one project of it; picking another project in the list
    clears that message."""
    Projects(running_app.home / "data" / "studio").create("Shown before", "Anna: A line, so that the next project's "
                                                                          "empty script shows when it opens.\n")
    reopened(page)
    page.wait_for_function(f"{ROWS_JS}.length === 1", timeout=60_000)

    new_name = page.locator("#studio-new-name").get_by_role("textbox")
    new_name.fill("Created stays")
    page.locator("#studio-create").click()
    expect(page.locator("#studio-project input")).to_have_value("Created stays", timeout=60_000)
    expect(page.locator("#studio-script textarea")).to_have_value("", timeout=60_000)  # the new project has opened
    shown(page, "studio-problems", "The script is empty")
    expect(page.locator("#studio-project-message")).to_have_text("✓ Created 'Created stays'.")

    new_name.fill("Created stays")
    page.locator("#studio-create").click()
    shown(page, "studio-project-message", "A project named 'Created stays' already exists")
    page.locator("#studio-project input").click()
    expect(page.get_by_role("option", name="Created stays", exact=True)).to_have_count(1)
    page.get_by_role("option", name="Shown before", exact=True).click()  # another project: the message goes
    expect(page.locator("#studio-project-message")).to_have_text("", timeout=30_000)


def test_a_narrator_deleted_since_is_said_and_the_script_still_saves(page, running_app):
    """A project whose narrator was deleted from the voices: the page refused every event that sent the narrator
    ('Value: Gone is not in the list of choices'), so an edited script was never saved. Now the narrator is shown as
    it is, the script's problems say to pick another, and the edits are saved."""
    project = Projects(running_app.home / "data" / "studio").create("Narrator gone", "Narration only.\n")
    project.update_settings(narrator="Gone")  # a voice that is not (any more) in the library
    reopened(page)
    expect(page.locator("#studio-project input")).to_have_value("Narrator gone", timeout=60_000)
    expect(page.locator("#studio-narrator input")).to_have_value("Gone", timeout=30_000)
    shown(page, "studio-problems", "The narrator voice 'Gone' is not a saved voice any more: pick another narrator.")

    edited = "Narration only, edited.\n"
    page.locator("#studio-script textarea").fill(edited)
    page.locator("#studio-script textarea").blur()
    project_json = project.folder / "project.json"
    deadline = time.monotonic() + 60
    while json.loads(project_json.read_text())["script"] != edited:
        assert time.monotonic() < deadline, "the edited script was not saved"
        time.sleep(0.2)
    page.locator("#studio-narrator input").click()
    page.get_by_role("option", name="Anna", exact=True).click()
    page.wait_for_function(f"{ROWS_JS}.length === 1 && {ROWS_JS}[0][2] === 'Anna'", timeout=60_000)
    assert "not in the list of choices" not in page.locator("body").inner_text()


def test_a_render_goes_on_behind_another_project_and_leaves_its_table(page, running_app):
    """Render all, then another project opened while it renders: the render's table, row keys and message were written
    over the project now shown (its rows listed under the other project's name, a row selected there was not found).
    The render goes on, and the table stays the project shown."""
    studio = Projects(running_app.home / "data" / "studio")
    studio.create("Shown meanwhile", "Bob: The only line of the project shown meanwhile.\n")
    behind = studio.create("Rendered behind", "".join(f"Anna: Line {i} rendered behind.\n" for i in range(1, 9)))
    reopened(page)  # the list has both
    page.locator("#studio-project input").click()
    page.get_by_role("option", name="Rendered behind", exact=True).click()
    page.wait_for_function(f"{ROWS_JS}.length === 8", timeout=60_000)
    steps = page.locator("#studio-steps input[type=number]")
    steps.fill("4")
    steps.press("Enter")
    page.locator("#studio-render").click()
    page.wait_for_function(f"{ROWS_JS}[0][4] === 'done'", timeout=180_000)
    page.locator("#studio-project input").click()
    page.get_by_role("option", name="Shown meanwhile", exact=True).click()
    page.wait_for_function(f"{ROWS_JS}.length === 1", timeout=60_000)
    page.locator("#studio-stop").click()  # the render ends now (or has ended), and answers for the last time
    page.wait_for_function("""() => { const p = document.querySelector('#studio-progress .vd-studio-progress');
        return p && ['stopped', 'done'].includes(p.dataset.state) && p.dataset.total === '8'; }""", timeout=180_000)
    assert any(line.kept() for line in studio.open(behind.slug).lines.values())  # the render's takes are kept
    page.locator("#studio-lines [role=gridcell]", has_text="The only line").first.click()
    expect(page.locator("#studio-line-info")).to_contain_text("The only line of the project shown meanwhile.",
                                                              timeout=30_000)
    assert [cells[3] for cells in page.evaluate(ROWS_JS)] == ["The only line of the project shown meanwhile."]


def test_a_book_whose_voice_was_deleted_after_rendering_still_exports(page, running_app):
    """Every line rendered, then a voice of the book deleted: the whole script was refused ('there is no saved voice'),
    no line listed, nothing exported. Now its lines are listed with their takes and the book exports."""
    text = "Gone: A line of a voice deleted since.\nAnna: And one of a voice still saved.\n"
    project = Projects(running_app.home / "data" / "studio").create("Voice deleted since", text)
    for cue in plan_cues(parse_script(text), None, ["Gone", "Anna"]):  # rendered while 'Gone' was a saved voice
        project.add_take(cue.key, np.full(24_000, 0.1, np.float32), 24_000, seed=1, render_s=0.1)
    reopened(page)
    page.locator("#studio-project input").click()
    page.get_by_role("option", name="Voice deleted since", exact=True).click()
    page.wait_for_function(f"{ROWS_JS}.length === 2 && {ROWS_JS}.every(cells => cells[4] === 'done')",
                           timeout=60_000)
    page.locator("#studio-export").click()
    shown(page, "studio-export-message", "✓ Exported 1 file(s)")
