"""engine.audio and engine.silence: reading clips, upstream's reference preparation and output
finishing, and the messages a person sees for clips that cannot be used."""
import json
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors.torch import load_file

from engine.audio import process, silence
from engine.audio.io import SAMPLE_RATE, load_clip
from engine.audio.pcm import from_pcm16_pydub, to_pcm16_pydub
from engine.audio.resample import resample
from engine.errors import AudioInputError

SPM = SAMPLE_RATE // 1000  # samples per millisecond


def tone(seconds, rate=SAMPLE_RATE, freq=220.0, amp=0.5):
    t = np.arange(int(round(seconds * rate))) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def gap(seconds, rate=SAMPLE_RATE):
    return np.zeros(int(round(seconds * rate)), np.float32)


# ---------------------------------------------------------------------------------------------
# reading files


@pytest.mark.parametrize("fmt,subtype,tol", [
    ("WAV", "PCM_U8", 2e-2), ("WAV", "PCM_16", 2e-3), ("WAV", "PCM_24", 2e-3), ("WAV", "PCM_32", 2e-3),
    ("WAV", "FLOAT", 2e-3), ("FLAC", "PCM_16", 2e-3), ("FLAC", "PCM_24", 2e-3), ("AIFF", "PCM_16", 2e-3),
])
@pytest.mark.parametrize("rate", [8000, 11025, 16000, 22050, 44100, 48000, 96000])
def test_lossless_files_any_rate_and_depth(tmp_path, fmt, subtype, tol, rate):
    path = tmp_path / f"clip.{fmt.lower()}"
    wave = tone(1.5, rate)
    sf.write(path, wave, rate, subtype=subtype, format=fmt)
    clip = load_clip(path)
    assert clip.samples.dtype == np.float32 and clip.source_rate == rate and not clip.truncated
    assert len(clip.samples) == int(np.ceil(len(wave) * SAMPLE_RATE / rate))
    want = 0.5 * np.sin(2 * np.pi * 220 * np.arange(len(clip.samples)) / SAMPLE_RATE)
    interior = slice(480, -480)  # resampling edges see zero padding
    np.testing.assert_allclose(clip.samples[interior], want[interior], atol=tol)


@pytest.mark.parametrize("fmt,subtype", [("OGG", "VORBIS"), ("OGG", "OPUS"), ("MP3", "MPEG_LAYER_III")])
def test_lossy_files(tmp_path, fmt, subtype):
    if subtype not in sf.available_subtypes(fmt):
        pytest.skip(f"this libsndfile cannot write {fmt}/{subtype}")
    path = tmp_path / f"clip.{fmt.lower()}"
    sf.write(path, tone(2.0, 48000), 48000, subtype=subtype, format=fmt)
    clip = load_clip(path)
    assert abs(clip.seconds - 2.0) < 0.1  # encoders add a little delay/padding
    assert 0.4 < np.abs(clip.samples[:-480]).max() < 0.6  # (Opus rings in its last milliseconds)


def test_stereo_is_averaged(tmp_path):
    left, right = tone(2.0, 44100, 220), tone(2.0, 44100, 330, amp=0.25)
    path = tmp_path / "stereo.wav"
    sf.write(path, np.stack([left, right], 1), 44100, subtype="FLOAT")
    want = resample(torch.from_numpy((left + right) / 2), 44100, SAMPLE_RATE).numpy()
    np.testing.assert_array_equal(load_clip(path).samples, want)


def test_arrays_and_tensors():
    wave = tone(2.0, 16000)
    from_float = load_clip((wave, 16000)).samples
    np.testing.assert_array_equal(load_clip((torch.from_numpy(wave), 16000)).samples, from_float)
    np.testing.assert_array_equal(load_clip((np.stack([wave, wave]), 16000)).samples, from_float)
    pcm = (wave * 32767).astype(np.int16)
    np.testing.assert_allclose(load_clip((pcm, 16000)).samples, from_float, atol=1e-4)
    with pytest.raises(AudioInputError, match="shaped"):
        load_clip((np.zeros((48000, 2), np.float32), 24000))
    with pytest.raises(AudioInputError, match="float, int16 or int32"):
        load_clip((np.zeros(48000, np.uint8), 24000))
    with pytest.raises(AudioInputError, match=r"\(waveform, sample_rate\)"):
        load_clip((16000, pcm))


def test_long_clips_are_read_only_up_to_max_seconds(tmp_path):
    path = tmp_path / "long.wav"
    sf.write(path, np.tile(np.concatenate([tone(1.0, 44100), gap(0.3, 44100)]), 60), 44100)
    whole = load_clip(path, max_seconds=None)
    head = load_clip(path, max_seconds=20.0)
    assert head.truncated and not whole.truncated and head.source_seconds == whole.source_seconds == 78.0
    assert len(head.samples) == 20 * SAMPLE_RATE
    np.testing.assert_array_equal(head.samples, whole.samples[: 20 * SAMPLE_RATE])


def test_ten_minute_clip_is_quick_and_trimmed(tmp_path):
    path = tmp_path / "ten_minutes.wav"
    rng = np.random.default_rng(0)
    with sf.SoundFile(path, "w", 48000, 2, subtype="PCM_16") as f:  # streamed: never 10 min in memory
        while f.frames < 601 * 48000:
            speech = tone(rng.uniform(1.5, 3.0), 48000) * rng.uniform(0.2, 1.0)
            block = np.concatenate([speech, gap(rng.uniform(0.3, 1.0), 48000)])
            f.write(np.stack([block, block * 0.8], 1))
    assert sf.info(str(path)).duration > 600
    start = time.perf_counter()
    clip = load_clip(path)
    ref = process.prepare_reference(clip.samples)
    elapsed = time.perf_counter() - start
    assert clip.truncated and clip.source_seconds > 600
    assert 3.0 <= len(ref.samples) / SAMPLE_RATE <= 15.0
    assert elapsed < 5.0, f"a 10-minute clip took {elapsed:.1f} s"


# ---------------------------------------------------------------------------------------------
# clips that cannot be used


def write(path, wave, rate=SAMPLE_RATE):
    sf.write(path, wave, rate)
    return path


def put(path, content: bytes):
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("make,message", [
    (lambda d: "https://example.com/voice.wav", "web address"),
    (lambda d: "ftp://example.com/voice.wav", "web address"),
    (lambda d: d / "nope.wav", "does not exist"),
    (lambda d: d, "folder"),
    (lambda d: put(d / "empty.wav", b""), r"empty \(0 bytes\)"),
    (lambda d: put(d / "bad.wav", b"RIFF\x10\x00\x00\x00WAVEjunk" + bytes(range(256)) * 8),
     "could not be read as audio"),
    (lambda d: put(d / "notes.mp3", b"these are not sounds " * 100), "could not be read as audio"),
    (lambda d: write(d / "zero.wav", np.zeros((0, 1), np.float32)), "no audio"),
    (lambda d: write(d / "silent.wav", gap(3.0)), "silent"),
    (lambda d: write(d / "hiss.wav", tone(3.0, amp=1e-4)),
     r"too quiet: its loudest moment is -7\d dBFS, 1\d dB below the -60 dBFS"),
    (lambda d: write(d / "short.wav", tone(0.5)), r"only 0\.5 s long"),
    (lambda d: write(d / "lowrate.wav", tone(2.0, 4000), 4000), "4000 Hz"),
    (lambda d: write(d / "highrate.wav", tone(2.0, 192000), 192000), "192000 Hz"),
])
def test_unusable_clips_say_why(tmp_path, make, message):
    with pytest.raises(AudioInputError, match=message):
        load_clip(make(tmp_path))


def test_nan_samples_are_rejected():
    wave = tone(2.0)
    wave[100] = np.nan
    with pytest.raises(AudioInputError, match="NaN"):
        load_clip((wave, SAMPLE_RATE))


# ---------------------------------------------------------------------------------------------
# pydub semantics, derived by hand from its rules (1 ms grid, 10 ms seek, integer RMS)


def test_inner_pause_kept_as_mid_silence_on_each_side():
    wave = np.concatenate([tone(1.0), gap(1.0), tone(1.0)])
    out = silence.remove_silence(wave, SAMPLE_RATE, mid_ms=200, lead_ms=100, trail_ms=200)
    # speech [0, 1000] and [2000, 3000] ms, each keeps 200 ms of the pause: 1200 + 1200 ms
    assert len(out) == 2400 * SPM
    assert not out[1000 * SPM: 1400 * SPM].any()
    np.testing.assert_array_equal(out[: 1000 * SPM], from_pcm16_pydub(to_pcm16_pydub(wave[: 1000 * SPM])))


def test_edges_keep_lead_and_trail():
    wave = np.concatenate([gap(0.5), tone(1.0), gap(0.5)])
    out = silence.remove_silence(wave, SAMPLE_RATE, mid_ms=200, lead_ms=100, trail_ms=200)
    # split keeps [300, 1700] ms; then 200 ms of leading silence -> keep 100, trailing 200 -> keep 200
    assert len(out) == 1300 * SPM
    assert not out[: 100 * SPM].any() and out[100 * SPM: 110 * SPM].any()
    assert not out[-200 * SPM:].any() and out[-210 * SPM: -200 * SPM].any()


def test_slices_round_to_whole_milliseconds():
    wave = np.concatenate([tone(1.0), np.full(13, 0.5, np.float32)])  # 1000.54 ms: pydub says 1001 ms
    out = silence.remove_silence(wave, SAMPLE_RATE, mid_ms=0, lead_ms=100, trail_ms=100)
    assert len(out) == 1001 * SPM  # the last millisecond is padded with zeros
    assert not out[-11:].any()


def test_trim_long_cuts_at_the_last_pause_before_15_s():
    # 2 s of speech then 0.6 s of pause: speech starts at 0, 2.6, 5.2, 7.8, 10.4, 13.0, 15.6 s ...
    wave = np.tile(np.concatenate([tone(2.0), gap(0.6)]), 10)
    assert len(silence.trim_long(wave, SAMPLE_RATE)) == 13000 * SPM
    no_pause = tone(25.0)
    assert len(silence.trim_long(no_pause, SAMPLE_RATE)) == 15000 * SPM
    short = wave[: 20 * SAMPLE_RATE]
    assert silence.trim_long(short, SAMPLE_RATE) is short


def test_matches_pydub_on_random_clips():
    """Differential check against pydub itself where it is installed (a development tool only)."""
    AudioSegment = pytest.importorskip("pydub").AudioSegment
    from pydub.silence import detect_leading_silence, detect_nonsilent, split_on_silence

    rng = np.random.default_rng(7)
    for _ in range(6):
        parts = [rng.standard_normal(int(rng.uniform(0.02, 1.2) * SAMPLE_RATE)) * 10 ** rng.uniform(-4.5, -0.5)
                 for _ in range(12)]
        wave = np.concatenate(parts + [np.zeros(int(rng.integers(0, SPM)))]).astype(np.float32)
        pcm = to_pcm16_pydub(wave)
        seg = AudioSegment(pcm.tobytes(), sample_width=2, frame_rate=SAMPLE_RATE, channels=1)
        clip = silence.Pcm16(pcm, SAMPLE_RATE)
        assert silence.detect_nonsilent(clip, 200, -50, 10) == detect_nonsilent(seg, 200, -50, 10)
        assert silence.leading_silence_ms(clip, -50) == detect_leading_silence(seg, -50)
        pieces = split_on_silence(seg, min_silence_len=500, silence_thresh=-50, keep_silence=500, seek_step=10)
        joined = np.frombuffer(b"".join(p.raw_data for p in pieces), np.int16)
        ours = to_pcm16_pydub(silence.remove_silence(wave, SAMPLE_RATE, 500, 0, 0))
        assert len(ours) <= len(joined)  # ours also trims the edges: compare the shared middle
        start = silence.leading_silence_ms(silence.Pcm16(joined, SAMPLE_RATE), -50) * SPM
        np.testing.assert_array_equal(ours, joined[start: start + len(ours)])


# ---------------------------------------------------------------------------------------------
# reference preparation and output finishing


def test_quiet_reference_is_raised_and_its_rms_kept():
    wave = np.concatenate([tone(2.0, amp=0.05), gap(0.1), tone(2.0, amp=0.05)])
    ref = process.prepare_reference(wave)
    assert ref.rms == pytest.approx(0.05 / np.sqrt(2) * len(tone(4.0)) ** 0.5 / len(wave) ** 0.5, rel=1e-4)
    assert np.sqrt(np.mean(ref.samples**2)) == pytest.approx(0.1, rel=2e-3)
    loud = process.prepare_reference(tone(3.0, amp=0.5))
    assert loud.rms > 0.1 and np.abs(loud.samples).max() == pytest.approx(0.5, abs=1e-4)


def test_reference_without_preprocessing_is_only_scaled():
    wave = np.concatenate([gap(1.0), tone(25.0, amp=0.05)])
    ref = process.prepare_reference(wave, preprocess=False)
    np.testing.assert_array_equal(ref.samples, wave * 0.1 / ref.rms)
    assert len(process.prepare_reference(wave, trim_long=False).samples) > 20 * SAMPLE_RATE
    assert len(process.prepare_reference(wave).samples) <= 15 * SAMPLE_RATE


def test_finish_output_loudness_fades_and_padding():
    wave = np.concatenate([tone(1.0), gap(1.0), tone(1.0)])
    pad = int(0.1 * SAMPLE_RATE)
    out = process.finish_output(wave, ref_rms=0.05)
    assert len(out) == (1000 + 500 + 500 + 1000) * SPM + 2 * pad  # pause shortened to 2 x 500 ms
    assert not out[:pad].any() and not out[-pad:].any() and out[pad] == 0
    assert np.abs(out).max() == pytest.approx(0.25, abs=1e-3)  # 0.5 * 0.05 / 0.1
    unreferenced = process.finish_output(wave, ref_rms=None, remove_pauses=False)
    assert len(unreferenced) == len(wave) + 2 * pad
    assert np.abs(unreferenced).max() == pytest.approx(0.5, abs=1e-6)
    loud_reference = process.finish_output(wave, ref_rms=0.3, remove_pauses=False)
    np.testing.assert_array_equal(loud_reference[pad:-pad][pad:-pad], wave[pad:-pad])
    assert len(process.finish_output(gap(1.0), ref_rms=None)) == 0  # nothing left after silence removal


def test_cross_fade_chunks():
    a, b, c = tone(1.0), tone(0.5), tone(0.05)
    third = int(0.3 * SAMPLE_RATE) // 3
    merged = process.cross_fade_chunks([a, b, c])
    assert len(merged) == len(a) + len(b) + len(c) + 2 * third
    assert not merged[len(a): len(a) + third].any()
    assert merged[len(a) - 1] == 0 and merged[len(a) + third] == 0  # end of fade-out, start of fade-in
    np.testing.assert_array_equal(merged[:100], a[:100])
    assert process.cross_fade_chunks([a]) is a


# ---------------------------------------------------------------------------------------------
# diagnostics


def test_inspect_clip_hints():
    good = process.inspect_clip(load_clip((np.concatenate([tone(3.0), gap(0.5), tone(3.0)]), SAMPLE_RATE)))
    assert good.hints == [] and good.seconds == pytest.approx(6.5) and good.peak == pytest.approx(0.5, abs=1e-3)
    assert good.silence_fraction == pytest.approx(0.5 / 6.5, abs=0.01)
    assert good.snr_db > 40

    short = process.inspect_clip(load_clip((tone(2.0), SAMPLE_RATE)))
    assert any("Short clip" in h for h in short.hints)
    clipped = process.inspect_clip(load_clip((np.clip(tone(5.0, amp=3.0), -1, 1), SAMPLE_RATE)))
    assert clipped.clipped_fraction > 0.5 and any("clipped" in h for h in clipped.hints)
    noisy_wave = tone(5.0, amp=0.3) * (np.arange(5 * SAMPLE_RATE) % SAMPLE_RATE < SAMPLE_RATE // 2)
    noisy_wave += np.random.default_rng(0).standard_normal(len(noisy_wave)).astype(np.float32) * 0.05
    noisy = process.inspect_clip(load_clip((noisy_wave, SAMPLE_RATE)))
    assert noisy.snr_db < 15 and any("background noise" in h for h in noisy.hints)
    t = np.arange(5 * SAMPLE_RATE) / SAMPLE_RATE
    square = process.inspect_clip(load_clip(((0.3 * np.sign(np.sin(2 * np.pi * 140 * t))).astype(np.float32),
                                             SAMPLE_RATE)))
    assert any("one steady sound" in h for h in square.hints) and not any("noise" in h for h in square.hints)
    syllables = (0.3 * np.sin(2 * np.pi * 140 * t) * (np.sin(2 * np.pi * 3 * t) > 0)).astype(np.float32)
    shifted = process.inspect_clip(load_clip((syllables + 0.3, SAMPLE_RATE)))
    assert any("DC offset of +0.30" in h for h in shifted.hints) and not any("noise" in h for h in shifted.hints)
    quiet = process.inspect_clip(load_clip((syllables * 0.01, SAMPLE_RATE)))
    assert any("very quiet (its loudest moment is -50 dBFS)" in h for h in quiet.hints)
    phone = process.inspect_clip(load_clip((tone(5.0, 8000), 8000)))
    assert any("8 kHz" in h for h in phone.hints)


# ---------------------------------------------------------------------------------------------
# upstream goldens (tests/data/goldens, recorded from omnivoice 0.2.1)

GOLDENS = Path(__file__).parents[1] / "data" / "goldens"


@pytest.fixture(scope="module")
def audio_goldens():
    return json.loads((GOLDENS / "audio.json").read_text()), load_file(GOLDENS / "audio.safetensors")


@pytest.mark.parametrize("name", ["voice_6s", "voice_2s", "voice_2s_stereo_44k"])
def test_reference_preparation_matches_upstream(audio_goldens, name):
    meta, tensors = audio_goldens
    clip_meta = meta["clips"][name]
    clip = load_clip(GOLDENS / clip_meta["file"])
    np.testing.assert_allclose(clip.samples, tensors[f"{name}.loaded"].numpy(), atol=1e-6, rtol=0)
    ref = process.prepare_reference(clip.samples, trim_long=False)  # upstream with a transcript
    assert ref.rms == pytest.approx(clip_meta["rms"], rel=1e-6)
    want = tensors[f"{name}.preprocessed"].numpy()
    assert ref.samples.shape == want.shape
    np.testing.assert_allclose(ref.samples, want, atol=1e-4, rtol=0)


def test_long_reference_trimming_matches_upstream(audio_goldens):
    meta, tensors = audio_goldens
    clip_meta = meta["clips"]["voice_25s"]
    clip = load_clip(GOLDENS / clip_meta["file"])
    assert len(clip.samples) == clip_meta["loaded_num_samples"]
    rms = float(np.sqrt(np.mean(clip.samples**2)))
    assert rms == pytest.approx(clip_meta["rms"], rel=1e-6) and rms > 0.1  # no boost: trim sees the file
    trimmed = silence.trim_long(clip.samples, SAMPLE_RATE)
    np.testing.assert_allclose(trimmed, tensors["voice_25s.trimmed"].numpy(), atol=1e-4, rtol=0)
    untrimmed = process.prepare_reference(clip.samples, trim_long=False)
    assert len(untrimmed.samples) == clip_meta["preprocessed_num_samples"]


@pytest.mark.parametrize("case", json.loads((GOLDENS / "postprocess.json").read_text())["cases"])
def test_output_finishing_matches_upstream(case):  # both loudness branches, no tidying, pad and fade from 0 to 2 s
    meta = json.loads((GOLDENS / "postprocess.json").read_text())["cases"][case]
    tensors = load_file(GOLDENS / "postprocess.safetensors")
    out = process.finish_output(tensors["input"].numpy(), meta["ref_rms"], remove_pauses=meta["postprocess_output"],
                              pad_s=meta["pad_duration"], fade_s=meta["fade_duration"])
    want = tensors[case].numpy()
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, atol=1e-4, rtol=0)


def test_unreadable_file_messages_name_the_file_not_its_folder(tmp_path):
    private = tmp_path / "cache" / "gradio" / "3f2a9c"  # the app's upload cache: not the user's business
    private.mkdir(parents=True)
    for name, content in (("corrupt.wav", b"RIFF\x00\x00\x00\x00WAVEjunk" * 100), ("empty.wav", b"")):
        (private / name).write_bytes(content)
        with pytest.raises(AudioInputError) as err:
            load_clip(private / name)
        assert name in str(err.value) and str(private) not in str(err.value)
