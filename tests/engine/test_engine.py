"""The engine facade on the tiny checkpoint (CPU): voices, synthesis, streaming, seeds, timings, errors."""
import threading
import time

import numpy as np
import pytest
import torch

import engine.engine as engine_module
from engine.config import GenerationConfig, Mode
from engine.constants import DEMO_MODEL
from engine.engine import Engine
from engine.errors import (
    AudioInputError,
    Cancelled,
    TextInputError,
    TranscriptRequiredError,
)
from engine.text.limits import MAX_INSTRUCT_CHARS, MAX_TEXT_CHARS, MAX_TRANSCRIPT_CHARS, check_request
from engine.voice import Voice
from tools.workloads import synthetic_voice

TEXT = "Hello there, nice to meet you. How are you today?"


@pytest.fixture(scope="module")
def engine():
    stages = []
    e = Engine.load(DEMO_MODEL, device="cpu", mode="hifi", progress=lambda p: stages.append(p.stage))
    assert stages[0] == "load" and stages[-1] == "ready"
    return e


@pytest.fixture(scope="module")
def voice(engine):
    return engine.voice_from_clip((synthetic_voice(4.0, seed=1), 24000), transcript="A short sentence to clone")


def test_a_cut_clip_is_never_paired_with_the_transcript_of_the_whole(engine, monkeypatch):
    """65 s with its whole transcript: the model would hear 60 s (then 15) and read all 65 s of words."""
    from engine.audio import asr

    long_talk = (synthetic_voice(65.0, seed=4), 24000)
    monkeypatch.setattr(asr, "transcribe", lambda wave, rate, device: None)  # no recogniser here
    with pytest.raises(AudioInputError, match="This recording is 65 s long and a reference is cut to its first "
                                              "60 s.*Trim the clip to at most 60 s"):
        engine.voice_from_clip(long_talk, transcript="A long talk, typed in full.")
    heard = []
    monkeypatch.setattr(asr, "transcribe", lambda wave, rate, device: heard.append(len(wave) / rate) or "Kept words")
    voice = engine.voice_from_clip(long_talk, transcript="A long talk, typed in full.")
    assert voice.transcript == "Kept words." and len(heard) == 1
    assert heard[0] == pytest.approx(voice.tokens.shape[1] / 25, abs=0.1) and heard[0] <= 15.5  # what the codec got
    assert voice.notes[0].startswith("Only the first 60 s of this 65 s recording")
    assert "the part kept was transcribed instead" in voice.notes[1]
    short = engine.voice_from_clip((synthetic_voice(20.0, seed=4), 24000), transcript="Typed for twenty seconds.")
    assert short.transcript == "Typed for twenty seconds." and short.notes == ()  # an uncut clip keeps it


def test_load_reports_the_backend_actually_used(engine):
    assert engine.mode is Mode.HIFI and engine.device.type == "cpu"
    assert engine.backend == "FP32 eager (CPU)"  # no GPU: graphs and fused kernels are not in use
    assert engine.is_demo and engine.sample_rate == 24000


def test_voice_from_clip_and_its_file_format(engine, voice, tmp_path):
    assert voice.tokens.shape[0] == 8 and 80 <= voice.tokens.shape[1] <= 100  # ~4 s minus trimmed pauses
    assert voice.transcript == "A short sentence to clone."  # upstream adds the final punctuation
    assert 0.05 < voice.rms < 0.2
    voice.save(tmp_path / "v")
    back = Voice.load(tmp_path / "v")
    assert torch.equal(back.tokens, voice.tokens) and back.transcript == voice.transcript and back.rms == voice.rms
    torch.save({"format_version": 1, "ref_audio_tokens": voice.tokens, "ref_text": "hi.", "ref_rms": 0.2},
               tmp_path / "upstream.pt")
    imported = Voice.from_upstream_prompt(tmp_path / "upstream.pt")
    assert torch.equal(imported.tokens, voice.tokens) and imported.transcript == "hi."
    (tmp_path / "v" / "voice.json").write_text("{not json")
    with pytest.raises(AudioInputError):
        Voice.load(tmp_path / "v")


def test_synthesize_is_seeded_and_timed(engine, voice):
    cfg = GenerationConfig(seed=7, num_step=8)
    a = engine.synthesize(TEXT, voice=voice, language="English", config=cfg)
    b = engine.synthesize(TEXT, voice=voice, language="English", config=cfg)
    c = engine.synthesize(TEXT, voice=voice, language="English", config=cfg.replace(seed=8))
    assert a.seed == 7 and a.sample_rate == 24000 and a.audio.dtype == np.float32
    np.testing.assert_array_equal(a.audio, b.audio)
    assert not np.array_equal(a.audio, c.audio)
    t = a.timings
    assert t.audio_s == pytest.approx(len(a.audio) / 24000)
    assert t.rtf == pytest.approx(t.total_s / t.audio_s)
    assert t.total_s >= t.generate_s + t.decode_s > 0
    assert a.tokens[0].shape[0] == 8 and (a.tokens[0] < 1024).all()


def test_takes_made_together_share_their_batchs_generate_and_decode_times(engine, voice):
    """Timings are wall-clock spans of each result's way: takes generated and decoded in one batch each report the
    batch's generate_s and decode_s, which their total_s holds (so the CLI's one result shows its own)."""
    takes = engine.takes(TEXT, voice, language="English", config=GenerationConfig(seed=3, num_step=4), n=2)
    first, second = (take.timings for take in takes)
    assert (first.generate_s, first.decode_s) == (second.generate_s, second.decode_s)
    assert all(t.total_s >= t.prepare_s + t.generate_s + t.decode_s for t in (first, second))


def busy(seconds: float) -> float:
    """Keep this thread busy until perf_counter has moved on `seconds`; the time it took."""
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pass
    return time.perf_counter() - start


def test_a_calls_planning_is_the_start_of_its_prepare_time(engine, voice, monkeypatch):
    """plan_s: the call until it asked for a batch (its plans made), inside prepare_s (the call until its batch took
    it in): a planning made slow shows in plan_s."""
    planning = []

    def slow_plan(*args, **kwargs):
        plan = real_plan(*args, **kwargs)
        planning.append(busy(0.05))
        return plan

    real_plan = engine_module.plan_request
    monkeypatch.setattr(engine_module, "plan_request", slow_plan)
    t = engine.synthesize(TEXT, voice, config=GenerationConfig(seed=1, num_step=2)).timings
    assert planning and t.plan_s >= sum(planning)
    assert t.plan_s <= t.prepare_s and t.prepare_s + t.generate_s + t.decode_s <= t.total_s


def test_a_streamed_groups_text_time_is_its_text_read_before_its_call_not_its_listeners_time(engine, voice,
                                                                                           monkeypatch):
    """text_s: the stream's text read out for a group before its call: for the first from the stream's call (a slow
    text shows there), for later ones from when the listener asked for more (its own time between parts is not
    counted); the group's call follows it (text_s + total_s within the time the listener waited)."""
    reading = []

    def slow_pieces(parts):
        for piece in real_pieces(parts):
            reading.append(busy(0.05))
            yield piece

    real_pieces = engine_module.stream_pieces
    monkeypatch.setattr(engine_module, "stream_pieces", slow_pieces)
    text = "Well, this is the first clause. Then comes a second sentence, and a third one follows it."
    asked = time.perf_counter()
    chunks = engine.stream(text, voice=voice, config=GenerationConfig(seed=3, num_step=2))
    first = next(chunks)
    first_waited = time.perf_counter() - asked
    assert first.timings.text_s >= reading[0]
    assert first.timings.text_s + first.timings.total_s <= min(first.timings.first_audio_s, first_waited)
    listening = busy(0.05)  # the listener's own time: not the next group's text
    asked = time.perf_counter()
    second = next(chunks)
    waited = time.perf_counter() - asked
    assert listening > 0 and second.timings.text_s + second.timings.total_s <= waited


def test_fixed_duration_sets_the_length(engine, voice):
    r = engine.synthesize(TEXT, voice=voice, config=GenerationConfig(seed=1, num_step=4, duration=2.0,
                                                                     postprocess_output=False))
    assert r.tokens[0].shape[1] == 50  # 25 frames per second
    assert len(r.audio) == 50 * 960 + 2 * 2400  # plus 0.1 s of padding on each side


def test_stream_starts_with_a_short_clause_and_covers_the_text(engine, voice):
    text = "Well, this is the first clause. Then comes a second sentence, and a third one follows it."
    chunks = list(engine.stream(text, voice=voice, config=GenerationConfig(seed=3, num_step=4)))
    assert len(chunks) >= 2 and chunks[-1].is_last and not chunks[0].is_last
    assert chunks[0].text == "Well, this is the first clause."
    assert "".join(c.text for c in chunks).replace(" ", "") == text.replace(" ", "")
    assert [c.index for c in chunks] == list(range(len(chunks)))
    first = chunks[0].timings.first_audio_s
    assert first is not None and all(c.timings.first_audio_s == first for c in chunks)


def test_stream_shares_a_fixed_duration_out_by_length(engine, voice):
    text = "Well, this is the first clause. Then comes a second sentence, and a third one follows it."
    cfg = GenerationConfig(seed=3, num_step=2, duration=4.0, postprocess_output=False, pad_duration=0.0)
    chunks = list(engine.stream(text, voice=voice, config=cfg))
    frames = [len(c.audio) / 960 for c in chunks]  # the codec makes 960 samples per frame; no padding
    assert len(chunks) >= 2
    assert frames == [int(4.0 * len(c.text) / len(text) * 25) for c in chunks]
    assert 90 <= sum(frames) <= 100  # 4 s in all (the spaces between pieces and rounding down lose a little)


def test_padding_and_fades_follow_the_settings(engine, voice):
    base = GenerationConfig(seed=1, num_step=2, duration=1.0, postprocess_output=False)
    plain = engine.synthesize("Hello.", voice=voice, config=base.replace(pad_duration=0.0, fade_duration=0.0))
    padded = engine.synthesize("Hello.", voice=voice, config=base.replace(pad_duration=0.25, fade_duration=0.05))
    assert len(plain.audio) == 25 * 960 and len(padded.audio) == 25 * 960 + 2 * 6000
    core = padded.audio[6000:-6000]
    assert not padded.audio[:6000].any() and not padded.audio[-6000:].any()
    np.testing.assert_array_equal(core[1200:-1200], plain.audio[1200:-1200])  # fades touch 50 ms at each end
    ramp = np.linspace(0, 1, 1200, dtype=np.float32)
    np.testing.assert_array_equal(core[:1200], plain.audio[:1200] * ramp)
    np.testing.assert_array_equal(core[-1200:], plain.audio[-1200:] * ramp[::-1])


def test_voice_design_and_auto_voice(engine):
    r = engine.synthesize("Xin chào, hôm nay trời đẹp quá.", instruct="female, low pitch", language="vi",
                          config=GenerationConfig(seed=1, num_step=4))
    assert len(r.audio) > 0 and np.abs(r.audio).max() == pytest.approx(0.5, abs=0.02)  # peak-normalised
    auto = list(engine.stream("First part, then the second part of it. And more text here.",
                              config=GenerationConfig(seed=2, num_step=4)))
    assert len(auto) >= 2


def test_bad_requests_give_clear_errors(engine, voice):
    with pytest.raises(TextInputError, match="no text"):
        engine.synthesize("   \n ", voice=voice)
    with pytest.raises(TextInputError, match=r"Use English items joined by .* \(american accent, "):
        engine.synthesize("Hello.", instruct="purple voice")
    with pytest.raises(AudioInputError):
        engine.voice_from_clip("https://example.com/a.wav", transcript="x")
    with pytest.raises(TranscriptRequiredError, match="Type what is said"):
        engine.voice_from_clip((synthetic_voice(3.0), 24000))  # no transcript, no Whisper here


def test_every_text_input_has_a_limit_that_the_engine_enforces(engine, voice):
    check_request("a" * MAX_TEXT_CHARS, "b" * MAX_TRANSCRIPT_CHARS, "c" * MAX_INSTRUCT_CHARS)  # at the limit: fine
    too_long_text = "word " * (MAX_TEXT_CHARS // 5) + "!"
    with pytest.raises(TextInputError, match="text is 50,001 characters long; the limit is 50,000"):
        engine.synthesize(too_long_text, voice=voice)
    with pytest.raises(TextInputError, match="the limit is 50,000"):
        next(engine.stream(too_long_text, voice=voice))  # refused before the first chunk
    with pytest.raises(TextInputError, match="transcript is 2,001 characters long; the limit is 2,000"):
        engine.voice_from_clip((synthetic_voice(3.0), 24000), transcript="x" * (MAX_TRANSCRIPT_CHARS + 1))
    imported = Voice(tokens=voice.tokens, transcript="y" * (MAX_TRANSCRIPT_CHARS + 1), rms=voice.rms)
    with pytest.raises(TextInputError, match="transcript is 2,001"):
        next(engine.stream("Hello.", voice=imported))
    with pytest.raises(TextInputError, match="voice description is 501 characters long; the limit is 500"):
        engine.synthesize("Hello.", instruct="female, " + "x" * (MAX_INSTRUCT_CHARS - 7))


def test_cancel_stops_between_steps(engine, voice):
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        engine.synthesize(TEXT, voice=voice, config=GenerationConfig(num_step=4), cancel=stop)
    assert engine.synthesize("Still works.", voice=voice, config=GenerationConfig(num_step=2)).audio.size


def test_a_cancel_set_while_the_eager_path_generates_stops_it_at_the_next_step(engine, voice, monkeypatch):
    """The eager path's batch asks its own cancel (set once every call in it is) before each step: set during step 0,
    no further step runs."""
    from engine.lm.decode import EagerGeneration

    stop, steps, step = threading.Event(), [], EagerGeneration.step

    def stepping(self):
        steps.append(self.done)
        step(self)
        stop.set()

    monkeypatch.setattr(EagerGeneration, "step", stepping)
    with pytest.raises(Cancelled):
        engine.synthesize(TEXT, voice=voice, config=GenerationConfig(num_step=4), cancel=stop)
    assert steps == [0]
