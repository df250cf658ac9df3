"""A whole Studio render through the engine facade on the demo model (CPU), then the export: the SRT's
timings against the audio, M4B chapter marks read back with ffprobe, the loudness target measured."""
import errno
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import srt
from extras import needs_tn

from app.library import LibraryError, VoiceLibrary
from app.loudness import measure_loudness
from app.studio.export import assemble, export
from app.studio.parse import parse_script
from app.studio.plan import REFERENCE_S, plan_cues, speech_seconds
from app.studio.project import Projects
from app.studio.render import Progress, pending, render_lines
from engine.config import GenerationConfig
from engine.constants import FRAME_RATE, SAMPLE_RATE
from engine.errors import Cancelled
from engine.fileio import storage_error
from engine.request import SpeechRequest

SCRIPT = """\
[voice Bob = male, low pitch]
# One
Anna: Hello there.
[pause 500ms]
Bob: Who is it?
Bob: Only me.

## Two
The end.
"""
STEPS = 4  # the demo model's output is noise at any step count; fewer steps keep the test short


@pytest.fixture(scope="module")
def library(engine, tmp_path_factory, reference_wav):
    library = VoiceLibrary(tmp_path_factory.mktemp("voices"))
    library.save("Anna", engine.voice_from_clip(str(reference_wav), transcript="A buzzing reference voice."))
    return library


class Recorder:
    """The real engine, noting what each render (a line, or a speaker's reference line) was given."""

    def __init__(self, engine):
        self.engine, self.calls, self.voices, self.batches = engine, [], [], []
        self.spoken_as_words = []  # (text, normalize_text) of each render

    def render(self, request, n=1, cancel=None):
        self._note([request])
        return self.engine.render(request, n, cancel)

    def render_many(self, requests, cancel=None):
        self._note(requests)
        self.batches.append([r.text for r in requests])
        return self.engine.render_many(requests, cancel)

    def _note(self, requests):
        for request in requests:
            self.spoken_as_words.append((request.text, request.config.normalize_text))
            self.calls.append((request.text, request.voice is not None, request.instruct, request.config.num_step))
            self.voices.append(request.voice)

    def synthesize(self, text, voice=None, *, instruct=None, language=None, config=None, cancel=None):
        request = SpeechRequest(text=text, voice=voice, instruct=instruct, language=language, config=config)
        return self.render(request, cancel=cancel)[0]

    def __getattr__(self, name):
        return getattr(self.engine, name)


def new_project(tmp_path, library, text=SCRIPT):
    project = Projects(tmp_path / "studio").create("Test book", text)
    project.update_settings(steps=STEPS)
    script = parse_script(text)
    cues = plan_cues(script, None, [e.name for e in library.entries()])
    return project, script, cues


@pytest.fixture(scope="module")
def rendered(engine, library, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("render")
    project, script, cues = new_project(tmp_path, library)
    recorder = Recorder(engine)
    events = list(render_lines(recorder, project, cues, library.find_voice))
    return tmp_path, project, script, cues, recorder, events, progress_of(cues, events)


def progress_of(cues, events) -> Progress:
    """The Studio's Progress of rendering `cues` after `events`."""
    progress = Progress.of(cues)
    for event in events:
        progress.add(event)
    return progress


def test_every_line_renders_in_order_with_its_voice(rendered):
    _, project, _, cues, recorder, events, progress = rendered
    assert [(e.kind, e.cue.line.text) for e in events] == [
        ("start", "Hello there."), ("done", "Hello there."),  # the first line alone: it is heard soon
        ("start", "Who is it?"), ("done", "Who is it?"),  # Bob's voice comes from this line: it ends its group
        ("start", "Only me."), ("start", "The end."), ("done", "Only me."), ("done", "The end.")]
    assert recorder.batches == [["Hello there."], ["Who is it?"], ["Only me.", "The end."]]
    assert recorder.calls == [
        ("Hello there.", True, None, STEPS),  # Anna: a saved voice
        ("Who is it?", False, "male, low pitch", STEPS),  # Bob's first line is designed from his description ...
        ("Only me.", True, "male, low pitch", STEPS),  # ... and is his voice from then on
        ("The end.", False, None, STEPS),  # the automatic narrator
    ]
    assert project.voice(cues[1].speaker.key) is not None and project.voice(cues[3].speaker.key) is not None
    assert pending(project, cues) == []
    assert progress.done == 4 and progress.rtf > 0 and progress.seconds_left == 0


@needs_tn
@pytest.mark.parametrize("speak_numbers", [True, False])
def test_numbers_are_spoken_as_words_in_every_line_and_made_voice_when_asked(engine, library, tmp_path,
                                                                             speak_numbers):
    """The app's "Speak numbers and dates" reaches the Studio: each line, and the reference line a speaker's voice
    is made from when a later line of theirs renders first (a retake of it), or neither; a made voice's transcript
    is what its audio says (its weight sets the speaker's pace), whether made first or kept from a line's take."""
    text = (SCRIPT.replace("Who is it?", "Who is it at 5 pm?").replace("Only me.", "Only me, with $20.")
            .replace("The end.", "The end of part 2."))
    project, _, cues = new_project(tmp_path, library, text)
    recorder = Recorder(engine)
    bob = next(c for c in cues if c.speaker.needs_voice and c.line.text != c.speaker.reference)
    assert {bob.line.text, bob.speaker.reference} == {"Who is it at 5 pm?", "Only me, with $20."}
    list(render_lines(recorder, project, [bob], library.find_voice, speak_numbers=speak_numbers))
    rest = pending(project, cues)
    list(render_lines(recorder, project, rest, library.find_voice, speak_numbers=speak_numbers))
    assert recorder.spoken_as_words == [(t, speak_numbers) for t in [
        bob.speaker.reference,  # his voice made first, from his reference line
        bob.line.text, *[c.line.text for c in rest]]]
    narrator = next(c for c in cues if c.line.text == "The end of part 2.")  # its take becomes its voice
    transcripts = [project.voice(c.speaker.key).transcript for c in (bob, narrator)]
    assert transcripts == (["Only me, with twenty dollars.", "The end of part two."] if speak_numbers else
                           ["Only me, with $20.", "The end of part 2."])


def test_batched_lines_equal_their_lone_renders(engine, library, tmp_path):
    """Render all generates its lines in growing groups, one batch each; every take is the one the line gets
    rendered alone with its seed."""
    text = "".join(f"Anna: Line number {n} of the batch. {{seed {n}}}\n" for n in range(1, 5))
    project, script, cues = new_project(tmp_path, library, text)
    recorder = Recorder(engine)
    done = [e for e in render_lines(recorder, project, cues, library.find_voice) if e.kind == "done"]
    assert recorder.batches == [[f"Line number {n} of the batch." for n in group] for group in ([1], [2, 3], [4])]
    voice = library.find_voice("Anna")
    for n, event in enumerate(done, start=1):
        alone = engine.synthesize(event.cue.line.text, voice, language=project.settings.language,
                                  config=GenerationConfig(num_step=STEPS, seed=n))
        assert event.take.seed == n
        np.testing.assert_array_equal(event.audio, alone.audio)


def test_groups_double_and_share_their_render_time(engine, library, tmp_path):
    """The groups double (1, 2, 4, ...), and a group's time is shared among its takes, not charged to each: the
    takes' render times add up to at most the whole render's (the time left is measured from them)."""
    project, script, cues = new_project(tmp_path, library, "".join(f"Anna: Line {n}.\n" for n in range(1, 9)))
    recorder = Recorder(engine)
    start = time.perf_counter()
    done = [e for e in render_lines(recorder, project, cues, library.find_voice) if e.kind == "done"]
    wall_s = time.perf_counter() - start
    assert recorder.batches == [[f"Line {n}." for n in group] for group in ([1], [2, 3], [4, 5, 6, 7], [8])]
    assert len(done) == 8 and sum(event.take.render_s for event in done) <= wall_s


class BrokenLine(Recorder):
    """An engine whose batches fail whenever they hold the line 'Broken.' (say, a driver error it causes)."""

    def render_many(self, requests, cancel=None):
        if any(r.text == "Broken." for r in requests):
            self.batches.append([r.text for r in requests])
            raise RuntimeError("the kernel failed")
        return super().render_many(requests, cancel)


def test_a_line_that_fails_its_group_fails_alone(engine, library, tmp_path):
    """A group that fails goes again line by line: only the line that fails it is failed."""
    project, script, cues = new_project(tmp_path, library, "Anna: One.\nAnna: Broken.\nAnna: Three.\n")
    recorder = BrokenLine(engine)
    events = [e for e in render_lines(recorder, project, cues, library.find_voice) if e.kind != "start"]
    assert [(e.kind, e.cue.line.number) for e in events] == [("done", 1), ("failed", 2), ("done", 3)]
    assert "RuntimeError: the kernel failed" in events[1].error
    assert recorder.batches == [["One."], ["Broken.", "Three."], ["Broken."], ["Three."]]


def test_a_render_and_a_clone_request_share_batches(engine, library, tmp_path, monkeypatch):
    """On the GPU worker a Studio render and a generation of the same steps and scoring run side by side: the
    generation asked while the render's first line generates starts in the next batch, then shares the
    render's next group's."""
    import engine.gather as gather
    from app.studio.render import batch_key
    from app.worker import GpuWorker

    project, script, cues = new_project(tmp_path, library, "".join(f"Anna: Line {n}.\n" for n in range(1, 4)))
    monkeypatch.setattr(gather, "GRACE_S", 600.0)  # a batch waits for the render's next group, however slow
    first_held, batches, run = threading.Event(), [], engine._generate_batch

    def spied(calls, cancel):
        batches.append([r.text for call in calls for r in call.requests])
        assert len(batches) > 1 or first_held.wait(60)
        return run(calls, cancel)

    monkeypatch.setattr(engine._gathering, "run_batch", spied)
    config = GenerationConfig(num_step=STEPS, seed=5)
    spoken = ["Spoken meanwhile.", "Its second sentence.", "And its third one."]
    worker = GpuWorker()
    try:
        render = worker.submit(lambda cancel: render_lines(engine, project, cues, library.find_voice, cancel),
                               owner="studio", batch=batch_key(engine, project))
        voice = library.find_voice("Anna")
        deadline = time.monotonic() + 60
        while not batches:  # the render's first line is generating
            assert time.monotonic() < deadline
            time.sleep(0.01)
        clone = worker.submit(lambda cancel: engine.stream("\n\n".join(spoken), voice, config=config,
                                                                cancel=cancel),
                              owner="clone", batch=engine.batch_key(config))
        while not engine._gathering._waiting:  # the clone request started beside it and waits for the next batch
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first_held.set()
        assert [value.kind for kind, value in render.follow(worker) if kind == "item"].count("done") == 3
        chunks = [value for kind, value in clone.follow(worker) if kind == "item"]
    finally:
        worker.shutdown()
    assert batches == [["Line 1."], spoken[:1], ["Line 2.", "Line 3.", *spoken[1:]]]
    for chunk in chunks:
        alone = engine.synthesize(chunk.text, voice, config=config.replace(seed=config.seed + chunk.index))
        np.testing.assert_array_equal(chunk.audio, alone.audio)


LONG = ("Bob starts with a long speech that goes on for quite a while, so that it would make a poor reference. "
        "It has a second sentence that keeps going with many more words in it, and a third one after that.")
MADE_VOICES = f"""\
[voice Bob = male, low pitch]
# One
Bob: {LONG}
Bob: Hi.
Bob: Here is a plain line of a few seconds. {{seed 7}}
Bob: A line in a whisper, of a few seconds too. {{instruct "whisper"}}

## Two
{LONG}
The end.
"""


def test_made_voices_come_from_one_short_line_whatever_renders_first(engine, library, tmp_path):
    """A designed voice and the automatic narrator: every line of theirs is spoken with one voice, made from a
    short line said plainly (Bob's plain line of a few seconds, not his whisper; for the narrator, whose lines
    are too long or too short, the first clause of the long one), in whichever order the lines render; that voice is
    kept in the project."""
    project, script, cues = new_project(tmp_path, library, MADE_VOICES)
    bob, narrator = cues[0].speaker.key, cues[4].speaker.key
    first_sentence = "Bob starts with a long speech that goes on for quite a while,"  # the first clause of 2 s or more
    assert [c.speaker.reference for c in cues] == ["Here is a plain line of a few seconds."] * 4 + [first_sentence] * 2
    assert all(REFERENCE_S[0] <= speech_seconds(c.speaker.reference) <= REFERENCE_S[1] for c in cues)

    recorder = Recorder(engine)
    order = [cues[3], cues[0], cues[5], cues[1], cues[2], cues[4]]  # one chapter after the other, retakes, ...
    assert [e.kind for e in render_lines(recorder, project, order, library.find_voice)] == \
        ["start", "done"] + ["start"] * 2 + ["done"] * 2 + ["start"] * 3 + ["done"] * 3  # groups of 1, 2, then 3
    assert [(text, has_voice) for text, has_voice, *_ in recorder.calls] == [
        ("Here is a plain line of a few seconds.", False),  # Bob's reference, rendered before his first line
        ("A line in a whisper, of a few seconds too.", True),
        (first_sentence, False),  # the narrator's reference, before the group of his first line
        (LONG, True),
        ("The end.", True),
        ("Hi.", True),
        ("Here is a plain line of a few seconds.", True),
        (LONG, True),
    ]
    kept = {key: project.voice(key) for key in (bob, narrator)}
    assert kept[bob].transcript == "Here is a plain line of a few seconds."
    assert kept[narrator].transcript == first_sentence
    assert all(voice.tokens.shape[1] <= (REFERENCE_S[1] + 1) * FRAME_RATE for voice in kept.values())
    lines_voices = [v for v in recorder.voices if v is not None]  # the voice each line of `order` was spoken with
    for cue, voice in zip(order, lines_voices, strict=True):
        assert voice.tokens.equal(kept[cue.speaker.key].tokens), cue  # one voice per speaker, the one kept

    # A fresh render of the same project (the app reopened) uses the kept voices: no new reference.
    again = Recorder(engine)
    list(render_lines(again, Projects(tmp_path / "studio").open(project.slug), [cues[1], cues[4]],
                      library.find_voice, new_seed=True))
    assert [has_voice for _, has_voice, *_ in again.calls] == [True, True]
    assert again.voices[0].tokens.equal(kept[bob].tokens) and again.voices[1].tokens.equal(kept[narrator].tokens)


def test_timeline_and_srt_match_the_audio(rendered):
    _, project, script, cues, *_ = rendered
    timeline = assemble(project, script, cues)
    settings = project.settings
    audio, rate = timeline.audio, SAMPLE_RATE
    starts = [round(s * rate) for s, _, _ in timeline.subtitles]
    ends = [round(e * rate) for _, e, _ in timeline.subtitles]
    for cue, start, end in zip(cues, starts, ends):
        np.testing.assert_array_equal(audio[start:end], project.audio(project.kept(cue.key)))
    gaps = [b - a for a, b in zip(ends, starts[1:])]
    assert gaps == [round(0.5 * rate),  # the pause replaces the gap
                    round(settings.line_gap_s * rate),
                    round(settings.chapter_gap_s * rate)]  # a chapter's end; the next starts right after it
    silent = np.concatenate([audio[:starts[0]], *[audio[a:b] for a, b in zip(ends, starts[1:])], audio[ends[-1]:]])
    assert not silent.any()
    assert [(m.title, round(m.start_s * rate)) for m in timeline.chapters] == [("One", 0), ("Two", starts[3])]
    assert timeline.chapters[-1].end_s == pytest.approx(timeline.seconds)


def ffprobe(path, *entries):
    out = subprocess.run(["ffprobe", "-v", "error", "-of", "json", *entries, str(path)], capture_output=True,
                         check=True, text=True).stdout
    return json.loads(out)


@pytest.mark.skipif(shutil.which("ffprobe") is None, reason="ffmpeg is needed for the export")
def test_export_m4b_chapters_srt_and_loudness(rendered):
    tmp_path, project, script, cues, *_ = rendered
    timeline = assemble(project, script, cues)
    [book] = export(project, script, cues, tmp_path / "out" / "book.m4b")
    chapters = ffprobe(book, "-show_chapters")["chapters"]
    assert [c["tags"]["title"] for c in chapters] == ["One", "Two"]
    assert [float(c["start_time"]) for c in chapters] == pytest.approx([m.start_s for m in timeline.chapters], abs=2e-3)
    duration = float(ffprobe(book, "-show_entries", "format=duration")["format"]["duration"])
    assert duration == pytest.approx(timeline.seconds, abs=0.05)
    subtitles = list(srt.parse(book.with_suffix(".srt").read_text(encoding="utf-8")))
    assert [(s.start.total_seconds(), s.end.total_seconds(), s.content) for s in subtitles] == [
        (pytest.approx(a, abs=1e-3), pytest.approx(b, abs=1e-3), text) for a, b, text in timeline.subtitles]

    target = measure_loudness(timeline.audio, SAMPLE_RATE).integrated_lufs - 6.0  # far from what it is
    project.update_settings(loudness_lufs=round(target, 1))
    [wav] = export(project, script, cues, tmp_path / "out" / "book.wav")
    samples, rate = sf.read(wav, dtype="float32")
    assert rate == SAMPLE_RATE and len(samples) == len(timeline.audio)
    assert measure_loudness(samples, rate).integrated_lufs == pytest.approx(target, abs=1.0)

    files = export(project, script, cues, tmp_path / "out" / "book.mp3", per_chapter=True)
    assert [f.name for f in files] == ["book-01-One.mp3", "book-02-Two.mp3"]
    assert all(f.with_suffix(".srt").is_file() for f in files)


def test_stop_keeps_finished_lines_and_resume_renders_the_rest(engine, library, tmp_path):
    project, script, cues = new_project(tmp_path, library, "Anna: One.\nAnna: Two.\nAnna: Three.\n")
    cancel = threading.Event()
    done = []
    with pytest.raises(Cancelled):
        for event in render_lines(engine, project, cues, library.find_voice, cancel):
            if event.kind == "done":
                done.append(event.cue)
                cancel.set()  # Stop pressed while line two starts
    assert done == cues[:1]
    reopened = Projects(tmp_path / "studio").open(project.slug)
    assert pending(reopened, cues) == cues[1:]
    list(render_lines(engine, reopened, pending(reopened, cues), library.find_voice))
    assert pending(reopened, cues) == [] and reopened.kept(cues[0].key) == project.kept(cues[0].key)


def test_a_failing_line_is_reported_and_the_rest_renders(engine, library, tmp_path):
    project, script, cues = new_project(tmp_path, library, "Anna: One.\nThe narrator.\n")

    def missing(name):  # the voice was deleted after the script was checked
        raise LibraryError(f"There is no saved voice '{name}'.")

    events = [e for e in render_lines(engine, project, cues, missing) if e.kind != "start"]
    assert [(e.kind, e.cue.line.number) for e in events] == [("failed", 1), ("done", 2)]
    assert "no saved voice 'Anna'" in events[0].error


def test_a_full_disk_stops_the_render_at_the_first_line_it_cannot_save(engine, library, tmp_path, monkeypatch):
    """The render stops at the first take it cannot store: the line batched with it is not stored either,
    and nothing after them is generated."""
    project, script, cues = new_project(tmp_path, library, "Anna: One.\nAnna: Two.\nAnna: Three.\nAnna: Four.\n")
    store = project.add_take

    def full_after_the_first(key, *args, **kwargs):
        if project.lines:
            raise storage_error(project.takes_dir, OSError(errno.ENOSPC, "No space left on device"))
        return store(key, *args, **kwargs)

    monkeypatch.setattr(project, "add_take", full_after_the_first)
    recorder = Recorder(engine)
    events = list(render_lines(recorder, project, cues, library.find_voice))
    assert [(e.kind, e.cue.line.number) for e in events] == [("start", 1), ("done", 1), ("start", 2), ("start", 3),
                                                             ("stopped", 2)]
    assert len(recorder.calls) == 3  # line 3 was generated with line 2 in one batch; nothing after them
    assert events[-1].error.startswith("The disk is full") and "stopped at line 2" in events[-1].error
    progress = progress_of(cues, events)
    assert (progress.done, progress.failed) == (1, 0)
    monkeypatch.setattr(project, "add_take", store)  # space freed: rendering again goes on from line 2
    assert [e.cue for e in render_lines(engine, project, pending(project, cues), library.find_voice)
            if e.kind == "done"] == cues[1:]


def test_checked_render_keeps_each_takes_verdict(engine, library, tmp_path, tiny_speaker_model):
    """Checks on (best of 2; signal checks and a tiny RANDOM speaker model, no recogniser): every line's
    kept take carries its verdict, which survives reopening the project and shows in the lines table."""
    from app.ui.studio_parts import rows, take_details
    from engine.checks.checker import Checker
    from engine.checks.policy import CheckMode, CheckPolicy
    from engine.checks.takes import Checks
    from engine.checks.voice import SpeakerEncoder

    checks = Checks(CheckPolicy(CheckMode.BEST_OF_N, candidates=2),
                    Checker(None, SpeakerEncoder(tiny_speaker_model), {"words": "not in this test"}))
    project, script, cues = new_project(tmp_path, library)
    events = [e for e in render_lines(engine, project, cues, library.find_voice, checks=checks) if e.kind == "done"]
    assert len(events) == 4
    reopened = Projects(tmp_path / "studio").open(project.slug)
    for cue in cues:
        verdict = reopened.kept(cue.key).checks
        assert verdict["attempts"] == 2 and {"clipping", "pauses", "dropouts"} <= set(verdict["checks"])
        assert verdict["skipped"]["words"] == "not in this test"
    # Anna's saved voice is the reference of her line; Bob's first line has no voice to compare with yet
    assert "voice" in reopened.kept(cues[0].key).checks["checks"]
    assert "voice" not in reopened.kept(cues[1].key).checks["checks"]
    assert "voice" in reopened.kept(cues[2].key).checks["checks"]
    table = rows(reopened, script, cues, {})
    def said(checks: dict) -> str:  # some checks could not run: the column says what was checked
        unchecked = f"; {', '.join(sorted(checks['skipped']))} not checked"
        if checks["passed"]:
            return ("voice, " if "voice" in checks["checks"] else "") + "signal ok" + unchecked
        failed = sorted(n for n, v in checks["checks"].items() if not v["passed"])
        return f"1/1 failed: {', '.join(failed)}{unchecked}"

    assert [row[-1] for row in table] == [said(reopened.kept(c.key).checks) for c in cues]
    label = take_details(reopened, cues[0], {})[1].choices[0][0]
    assert "2 takes" in label


def test_a_full_disk_when_a_made_voice_is_kept_stops_the_render(engine, library, tmp_path, monkeypatch):
    """A speaker's voice made before their line (from a short line of theirs) and not storable: the render stops
    at that line, as at a take it cannot store, and nothing after it is generated."""
    project, script, cues = new_project(tmp_path, library, f"[voice Bob = male, low pitch]\nBob: {LONG}\n"
                                                           "Bob: Hi.\nBob: The end.\n")

    def full(key, voice):
        raise storage_error(project.takes_dir, OSError(errno.ENOSPC, "No space left on device"))

    monkeypatch.setattr(project, "keep_voice", full)
    recorder = Recorder(engine)
    events = list(render_lines(recorder, project, cues, library.find_voice))
    assert [(e.kind, e.cue) for e in events] == [("start", cues[0]), ("stopped", cues[0])]
    assert events[-1].error.startswith("The disk is full") and len(recorder.calls) == 1  # the voice's line only


@pytest.mark.parametrize("fault, stops", [(RuntimeError("the encoder broke"), False),
                                          (storage_error(Path("voices"), OSError(errno.ENOSPC, "No space")), True)])
def test_a_take_that_cannot_become_the_voice_is_kept_and_the_next_line_tries_again(engine, library, tmp_path,
                                                                                   monkeypatch, fault, stops):
    """Bob's first line is his reference: its take is rendered and stored, then keeping it as his voice fails. The
    line is done (a kept take, which Render all does not redo) with a warning that says why; his next line makes
    his voice again (here it works). A full disk stops the render after that line, as at a take it cannot store."""
    project, script, cues = new_project(tmp_path, library, "[voice Bob = male, low pitch]\n"
                                                           "Bob: Here is a plain line of a few seconds.\nBob: Hi.\n")
    assert cues[0].speaker.reference == cues[0].line.text
    keep_voice, faults = project.keep_voice, [fault]

    def fails_once(key, voice):
        if faults:
            raise faults.pop()
        keep_voice(key, voice)

    monkeypatch.setattr(project, "keep_voice", fails_once)
    recorder = Recorder(engine)
    events = list(render_lines(recorder, project, cues, library.find_voice))
    done = events[1]
    assert (done.kind, done.cue) == ("done", cues[0]) and project.kept(cues[0].key) is not None
    assert done.warning.startswith("The take is kept, but it could not become Bob's voice (")
    assert pending(project, cues) == ([cues[1]] if stops else [])
    if stops:
        assert [e.kind for e in events] == ["start", "done", "stopped"] and "disk is full" in events[-1].error
        return
    assert "RuntimeError: the encoder broke" in done.warning
    assert [(e.kind, e.cue) for e in events[2:]] == [("start", cues[1]), ("done", cues[1])]
    assert events[3].warning is None and project.voice(cues[1].speaker.key) is not None
    # his next line rendered his reference again first (a voice made for it), then itself with that voice
    assert [(text, has_voice) for text, has_voice, *_ in recorder.calls] == [
        (cues[0].line.text, False), (cues[0].line.text, False), ("Hi.", True)]
