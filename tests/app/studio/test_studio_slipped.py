"""Studio behaviours a stranger's planted bugs got past: the longest pause, pause units in any case, voice names
in any case, a colon in narration, repeated lines, empty chapters, the project list's order, resuming a project
whose name differs only in spaces, and the time-left estimate."""
import numpy as np
import pytest

from app.studio.export import assemble, export
from app.studio.parse import parse_script
from app.studio.plan import plan_cues
from app.studio.project import Projects
from app.studio.render import Progress, RenderEvent, estimate_seconds
from app.studio.script import MAX_PAUSE_S, Pause
from engine.constants import SAMPLE_RATE


def pauses(text: str) -> list[float]:
    return [item.seconds for chapter in parse_script(text).chapters for item in chapter.items
            if isinstance(item, Pause)]


def test_the_longest_allowed_pause_and_units_in_any_case():
    assert pauses(f"Hi. [pause {MAX_PAUSE_S:g}s]") == [MAX_PAUSE_S]
    assert pauses("Hi. [pause 5MS] [pause 2S] [Pause 0.5s]") == [0.005, 2.0, 0.5]


def test_voice_names_are_one_voice_in_any_case():
    script = parse_script("[voice Bob = male, low pitch]\nBob: Hello there.\n[bob] And again.\n[BOB] Once more.\n")
    cues = plan_cues(script, None, [])
    assert len({c.speaker.key for c in cues}) == 1 and cues[0].speaker.instruct == "male, low pitch"
    saved = plan_cues(parse_script("Anna: One.\n[anna] Two.\n"), None, ["ANNA"])
    assert len({c.speaker.key for c in saved}) == 1


def test_a_colon_inside_narration_is_no_speaker():
    [line] = parse_script("Meanwhile in the city: chaos.\n").lines
    assert line.voice is None and line.text == "Meanwhile in the city: chaos."
    [named] = parse_script("Old Tom: Only me.\n").lines
    assert named.voice == "Old Tom"  # the control: capitalised words before a colon name a speaker


def test_repeated_identical_lines_each_get_their_own_take(tmp_path):
    cues = plan_cues(parse_script("Hello.\nHello.\nHello.\n"), None, [])
    assert len({c.key for c in cues}) == 3
    project = Projects(tmp_path).create("Echo")
    for i, cue in enumerate(cues):
        project.add_take(cue.key, np.full(2400, 0.1 * (i + 1), np.float32), SAMPLE_RATE, seed=i, render_s=0.1)
    assert len({project.kept(c.key).id for c in cues}) == 3


def tone(seconds=0.5):
    return (0.2 * np.sin(np.arange(int(seconds * SAMPLE_RATE)) / 8)).astype(np.float32)


def test_empty_chapters_get_no_chapter_mark_and_no_file(tmp_path, monkeypatch):
    text = "# One\nThe first line.\n# Empty\n# Three\nThe last line.\n"
    script = parse_script(text)
    cues = plan_cues(script, None, [])
    project = Projects(tmp_path / "studio").create("Book", text)
    for cue in cues:
        project.add_take(cue.key, tone(), SAMPLE_RATE, seed=1, render_s=0.1)
    timeline = assemble(project, script, cues)
    assert [mark.title for mark in timeline.chapters] == ["One", "Three"]
    monkeypatch.setattr("app.studio.export.normalize_loudness", lambda audio, *args: audio)  # no ffmpeg needed
    written = export(project, script, cues, tmp_path / "out" / "book.wav", per_chapter=True)
    assert [p.name for p in written] == ["book-01-One.wav", "book-02-Three.wav"]


def test_projects_are_listed_newest_first(tmp_path, monkeypatch):
    clock = iter(f"2026-12-02T01:00:{second:02d}+00:00" for second in range(60))
    monkeypatch.setattr("app.studio.project._now", lambda: next(clock))  # one second apart, whatever the machine
    projects = Projects(tmp_path)
    for name in ("A first", "B second", "C third"):
        projects.create(name)
    assert [name for name, _slug in projects.names()] == ["C third", "B second", "A first"]
    projects.open(projects.names()[-1][1]).update_settings(steps=8)  # a change makes the oldest the newest
    assert [name for name, _slug in projects.names()] == ["A first", "C third", "B second"]


def test_the_command_line_resumes_a_project_whose_name_differs_only_in_spaces(tmp_path):
    first = Projects(tmp_path).open_or_create("my  book.md (abc123)")
    again = Projects(tmp_path).open_or_create("my book.md  (abc123)")
    assert again.slug == first.slug and len(Projects(tmp_path).names()) == 1


def test_time_left_follows_the_measured_pace(tmp_path):
    cues = plan_cues(parse_script("One line here.\nA second line here.\nThird line.\nThe fourth one.\n"), None, [])
    progress = Progress.of(cues)
    assert progress.seconds_left is None  # nothing measured yet
    project = Projects(tmp_path).create("Pace")
    take = project.add_take(cues[0].key, np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE, seed=1, render_s=2.0)
    progress.add(RenderEvent("done", cues[0], take))
    left = sum(estimate_seconds(c) for c in cues[1:])
    assert progress.seconds_left == pytest.approx(left * 2.0 / estimate_seconds(cues[0]))
    assert progress.rtf == pytest.approx(2.0) and progress.fraction == 0.25


def test_no_time_is_left_once_every_line_has_ended(tmp_path, monkeypatch):
    """Lines estimated 0.1, 0.2 and 0.7 s ending in the order 0.2, 0.1, 0.7: their sum less each in turn leaves
    1.1e-16 s in floats; the CLI and the page show "0 s left" only at exactly 0."""
    cues = plan_cues(parse_script("Line a.\nLine b.\nLine c.\n"), None, [])
    estimates = dict(zip((c.key for c in cues), (0.1, 0.2, 0.7)))
    monkeypatch.setattr("app.studio.render.estimate_seconds", lambda cue: estimates[cue.key])
    progress = Progress.of(cues)
    project = Projects(tmp_path).create("Ends")
    for cue in (cues[1], cues[0]):
        progress.add(RenderEvent("done", cue, project.add_take(cue.key, np.zeros(SAMPLE_RATE, np.float32),
                                                                 SAMPLE_RATE, seed=1, render_s=0.5)))
    assert progress.seconds_left > 0
    progress.add(RenderEvent("failed", cues[2], error="the GPU ran out of memory"))
    assert progress.seconds_left == 0 and progress.fraction == 1


class SeedRecorder:
    """A stand-in engine that notes the seed of each render (the demo model would take seconds per line)."""

    def __init__(self):
        self.seeds = []

    def render_many(self, requests, cancel=None):
        from types import SimpleNamespace

        results = []
        for request in requests:
            self.seeds.append(request.config.seed)
            audio = np.random.default_rng(request.config.seed).uniform(-0.2, 0.2, 4800).astype(np.float32)  # per seed
            results.append(SimpleNamespace(audio=audio, sample_rate=SAMPLE_RATE, seed=request.config.seed))
        return results

    def member(self):
        import contextlib

        return contextlib.nullcontext()


def test_a_retake_of_a_seeded_line_draws_a_new_seed(tmp_path):
    import torch

    from app.studio.render import render_lines
    from engine.voice import Voice

    anna = Voice(tokens=torch.zeros(8, 10, dtype=torch.int64), transcript="Anna.", rms=0.1)
    cues = plan_cues(parse_script("Anna: A seeded line. {seed 5}\n"), None, ["Anna"])
    project = Projects(tmp_path).create("Seeds")
    engine = SeedRecorder()
    list(render_lines(engine, project, cues, lambda name: anna))
    list(render_lines(engine, project, cues, lambda name: anna, new_seed=True))  # "Render a new take"
    assert engine.seeds[0] == 5 and engine.seeds[1] != 5
    assert len(project.takes(cues[0].key)) == 2
