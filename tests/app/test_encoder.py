"""app/encoder.py, checked with decoders it does not share: the ffmpeg command line and libsndfile."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from app.encoder import FILE_FORMATS, FORMATS, ChapterMark, EncodeError, open_encoder, write_file

ROOT = Path(__file__).resolve().parents[2]
RATE = 24000
# Decoded length may exceed the input by the codec's priming plus the last frame's padding, each
# under one frame (1152 samples for MP3, 1024 for AAC); the other formats are sample exact.
SLACK = {"mp3": 2 * 1152, "aac": 2 * 1024}


def tone(seconds: float, freq: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return np.round(8000 * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def strongest_hz(samples: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64)))
    return float(np.fft.rfftfreq(len(samples), 1 / RATE)[np.argmax(spectrum)])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_chunks_decode_to_the_same_audio(fmt, decode_audio):
    first, second = tone(0.7), tone(0.5, 440.0)
    encoder = open_encoder(fmt, RATE)
    data = encoder.encode(first) + encoder.encode(second) + encoder.finish()
    decoded = decode_audio(data, fmt)
    expected = np.concatenate([first, second])
    assert len(expected) <= len(decoded) <= len(expected) + SLACK.get(fmt, 0)
    if fmt in ("wav", "pcm", "flac"):
        np.testing.assert_array_equal(decoded, expected)
    else:  # lossy: the same tones, at the same loudness, in the same order (priming shifts them a little)
        head, tail = decoded[: int(0.6 * RATE)], decoded[-int(0.4 * RATE):]
        assert strongest_hz(head) == pytest.approx(220, abs=3) and strongest_hz(tail) == pytest.approx(440, abs=3)
        rms = np.sqrt(np.mean(decoded.astype(np.float64) ** 2))
        assert rms == pytest.approx(8000 / np.sqrt(2), rel=0.1)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_chunk_comes_out_before_the_next_one(fmt, decode_audio):
    """What a client can play after the first chunk: all of it but less than one codec frame."""
    chunk = tone(0.6)
    encoder = open_encoder(fmt, RATE)
    early = encoder.encode(chunk)
    decoded = decode_audio(early, fmt)
    held_back = {"mp3": 2 * 1152, "aac": 2 * 1024, "opus": 960, "flac": 4608}.get(fmt, 0)
    assert len(decoded) >= len(chunk) - held_back, (fmt, len(early), len(decoded))
    encoder.finish()


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_a_file_gets_a_complete_header(tmp_path, fmt):
    path = tmp_path / f"out.{fmt}"
    encoder = open_encoder(fmt, RATE, file=path)
    assert encoder.encode(tone(0.3)) == b""
    encoder.encode(tone(0.2))
    encoder.finish()  # the file is complete and closed now, while the encoder is still referenced
    info = sf.info(path)
    assert (info.samplerate, info.channels, info.frames) == (RATE, 1, len(tone(0.3)) + len(tone(0.2)))
    if fmt == "wav":  # the lengths filled in, not still in a write buffer
        assert path.read_bytes()[40:44] == (2 * info.frames).to_bytes(4, "little")


def test_streamed_wav_and_opus_read_with_libsndfile(tmp_path):
    """The header of a streamed WAV has no length: libsndfile (soundfile) must still read it all."""
    for fmt in ("wav", "opus"):
        encoder = open_encoder(fmt, RATE)
        path = tmp_path / f"streamed.{fmt}"
        path.write_bytes(encoder.encode(tone(0.5)) + encoder.finish())
        samples, rate = sf.read(path, dtype="int16")
        assert rate == RATE and len(samples) == len(tone(0.5))


@pytest.mark.parametrize("suffix", list(FILE_FORMATS))
def test_exported_files_hold_the_same_audio_and_chapters(tmp_path, suffix, decode_audio):
    """The Studio's exports (float samples in): each file decodes to the same audio, at its length, with the
    title and the chapter marks where the container has them."""
    audio = np.concatenate([tone(0.7), tone(0.5, 440.0)]).astype(np.float32) / 32768
    marks = [ChapterMark("One", 0.0, 0.7), ChapterMark("Two = 2", 0.7, 1.2)]
    path = write_file(audio, RATE, tmp_path / f"book{suffix}", title="A book", chapters=marks)
    decoded = decode_audio(path.read_bytes(), suffix[1:])
    expected = np.concatenate([tone(0.7), tone(0.5, 440.0)])
    lossy = FILE_FORMATS[suffix].codec in ("libmp3lame", "aac")
    assert len(expected) <= len(decoded) <= len(expected) + (2 * 1152 if lossy else 0)
    if not lossy:
        np.testing.assert_array_equal(decoded, expected)
    else:
        head, tail = decoded[: int(0.6 * RATE)], decoded[-int(0.4 * RATE):]
        assert strongest_hz(head) == pytest.approx(220, abs=3) and strongest_hz(tail) == pytest.approx(440, abs=3)
        assert np.sqrt(np.mean(decoded.astype(np.float64) ** 2)) == pytest.approx(8000 / np.sqrt(2), rel=0.1)
    probe = json.loads(subprocess.run(["ffprobe", "-v", "error", "-of", "json", "-show_chapters", "-show_entries",
                                       "format=duration:format_tags=title", str(path)],
                                      capture_output=True, text=True, check=True).stdout)
    assert probe["format"]["tags"]["title"] == "A book"
    if suffix in (".m4b", ".m4a", ".mp3"):
        assert [(c["tags"]["title"], float(c["start_time"]), float(c["end_time"])) for c in probe["chapters"]] == \
            [("One", 0.0, 0.7), ("Two = 2", 0.7, 1.2)]
    assert not [p for p in tmp_path.iterdir() if p != path]  # written atomically: no temporary file left


def test_export_refuses_other_suffixes_and_no_audio(tmp_path):
    with pytest.raises(EncodeError, match="use one of"):
        write_file(np.zeros(10, np.float32), RATE, tmp_path / "book.ogg")
    with pytest.raises(EncodeError, match="no audio"):
        write_file(np.zeros(0, np.float32), RATE, tmp_path / "book.wav")


def test_float_samples_become_the_same_int16_in_wav_as_through_ffmpeg(tmp_path, decode_audio):
    """WAV is written without FFmpeg, FLAC through it: a float export must hold the same samples in both, at the
    edges too (full scale, beyond it, ties between two steps, which round to the even one)."""
    edges = np.array([0, 1.0, -1.0, 1.5, -1.5, 0.5 / 32768, 1.5 / 32768, -0.5 / 32768, 32767.5 / 32768,
                      -32768.5 / 32768, 0.25], np.float32)
    audio = np.concatenate([edges, tone(0.2).astype(np.float32) / 32768 * 1.7])
    wav = decode_audio(write_file(audio, RATE, tmp_path / "a.wav").read_bytes(), "wav")
    flac = decode_audio(write_file(audio, RATE, tmp_path / "a.flac").read_bytes(), "flac")
    np.testing.assert_array_equal(wav, flac)
    np.testing.assert_array_equal(wav[:len(edges)], [0, 32767, -32768, 32767, -32768, 0, 2, 0, 32767, -32768, 8192])


@pytest.mark.parametrize("suffix", [".wav", ".flac"])
def test_float64_samples_are_exported_as_float32_ones(tmp_path, suffix, decode_audio):
    audio = tone(0.2) / 8000 * 0.7  # float64, peak 0.7
    wide = decode_audio(write_file(audio, RATE, tmp_path / f"wide{suffix}").read_bytes(), suffix[1:])
    narrow = decode_audio(write_file(audio.astype(np.float32), RATE, tmp_path / f"n{suffix}").read_bytes(), suffix[1:])
    assert np.abs(narrow).max() > 10_000
    np.testing.assert_array_equal(wide, narrow)


def test_streamed_wav_is_ffmpegs_header_then_the_samples():
    """A streamed WAV's header comes with the first samples and says its lengths are unknown, as FFmpeg's does."""
    encoder = open_encoder("wav", RATE)
    first = encoder.encode(np.array([1, -2], np.int16))
    assert first[:4] == b"RIFF" and first[4:8] == b"\xff\xff\xff\xff" and first[8:12] == b"WAVE"
    assert first[-12:] == b"data\xff\xff\xff\xff" + np.array([1, -2], "<i2").tobytes()
    assert encoder.encode(np.array([3], np.int16)) == np.array([3], "<i2").tobytes()
    assert encoder.finish() == b""
    empty = open_encoder("wav", RATE)
    assert empty.finish()[:4] == b"RIFF"  # no samples at all: still a WAV that says so


def test_pcm_and_wav_need_no_pyav_the_others_say_they_do(tmp_path):
    """With PyAV not installed, pcm and wav are written as ever; asking for a format that needs it says so."""
    hidden = tmp_path / "no_pyav" / "av"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'av'\", name='av')\n")
    script = (
        "import sys, numpy as np\n"
        "from app.encoder import EncodeError, open_encoder, write_file\n"
        "samples = np.arange(-3, 3, dtype=np.int16)\n"
        "for fmt in ('pcm', 'wav'):\n"
        "    encoder = open_encoder(fmt, 24000)\n"
        "    print(fmt, len(encoder.encode(samples) + encoder.finish()))\n"
        f"write_file(samples, 24000, {str(tmp_path / 'out.wav')!r})\n"
        "for fmt in ('mp3', 'opus', 'aac', 'flac'):\n"
        "    try:\n"
        "        open_encoder(fmt, 24000)\n"
        "    except EncodeError as err:\n"
        "        print(fmt, 'refused:', err)\n"
        "print('av' in sys.modules and sys.modules['av'] is not None)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden.parent), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[:2] == ["pcm 12", "wav 56"]
    for line, fmt in zip(out[2:6], ("mp3", "opus", "aac", "flac"), strict=True):
        assert line.startswith(f"{fmt} refused: {fmt} needs PyAV (pip install av)") and "pcm and wav need" in line
    assert out[6] == "False"
    assert sf.read(tmp_path / "out.wav", dtype="int16")[0].tolist() == [-3, -2, -1, 0, 1, 2]


def ffmpeg_wav(samples: np.ndarray, title: str | None, output: str) -> bytes:
    """What FFmpeg's own WAV muxer writes for int16 `samples` to `output` (a file, or pipe:1: returned), bitexact:
    without its encoder tag."""
    metadata = ["-metadata", f"title={title}"] if title else []
    return subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "s16le", "-ar", str(RATE), "-ac", "1", "-i", "pipe:0",
                           "-flags", "+bitexact", "-fflags", "+bitexact", *metadata, "-f", "wav", output],
                          input=samples.astype("<i2").tobytes(), capture_output=True, check=True).stdout


@pytest.mark.parametrize("title", [None, "A book", "Été"])
def test_wav_is_byte_for_byte_what_ffmpeg_writes(tmp_path, title):
    """Every header field (byte rate, block align, the RIFF and data lengths, the INFO chunk and its padding), in a
    file with its lengths filled in and in a stream without them, as FFmpeg's muxer writes them: players and
    editors read fields that the decoders of the other tests ignore."""
    samples = np.concatenate([tone(0.1), [-3, 0, 3]]).astype(np.int16)
    ours = write_file(samples, RATE, tmp_path / "ours.wav", title=title)
    ffmpeg_wav(samples, title, str(tmp_path / "theirs.wav"))
    assert ours.read_bytes() == (tmp_path / "theirs.wav").read_bytes()
    encoder = open_encoder("wav", RATE, title=title)
    streamed = encoder.encode(samples[:100]) + encoder.encode(samples[100:]) + encoder.finish()
    assert streamed == ffmpeg_wav(samples, title, "pipe:1")


class _HeaderSink:
    """A seekable binary file that keeps its first `keep` bytes (a WAV's header) and only counts the rest."""

    def __init__(self, keep: int):
        self.keep, self.head, self.size, self.position = keep, bytearray(), 0, 0

    def write(self, data) -> int:
        if self.position < self.keep:
            self.head[self.position:self.position + len(data)] = bytes(data[:self.keep - self.position])
        self.position += len(data)
        self.size = max(self.size, self.position)
        return len(data)

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int) -> int:
        self.position = offset
        return offset


def test_a_wav_over_4_gib_says_its_lengths_are_unknown():
    """A RIFF length has 32 bits: past 4 GiB of samples (24.8 hours at 24 kHz) the lengths stay 0xFFFFFFFF, which
    decoders read to the end, never a wrapped length that would cut the audio short."""
    sink = _HeaderSink(keep=44)
    encoder = open_encoder("wav", RATE, file=sink)
    chunk = np.zeros(2**25, np.int16)  # 64 MiB
    for _ in range(2**32 // chunk.nbytes + 1):
        encoder.encode(chunk)
    encoder.finish()
    assert sink.size == 44 + 2**32 + chunk.nbytes
    assert sink.head[:4] == b"RIFF" and sink.head[4:8] == b"\xff\xff\xff\xff"
    assert sink.head[36:44] == b"data\xff\xff\xff\xff"


def test_export_suffixes_are_read_whatever_their_case(tmp_path, decode_audio):
    """The Studio takes 'Book.WAV' or 'Book.M4B' (app/studio/export.py): the file is written in that format."""
    for suffix in (".WAV", ".M4B"):
        path = write_file(tone(0.3), RATE, tmp_path / f"Book{suffix}")
        assert len(decode_audio(path.read_bytes(), suffix[1:].lower())) >= len(tone(0.3))
    assert path.read_bytes()[4:8] == b"ftyp"


def test_m4b_and_m4a_put_their_index_first(tmp_path):
    """'+faststart': the moov box (the index) comes before the mdat box (the audio), so that a player can seek
    in a book before it has read the whole file."""
    for suffix in (".m4b", ".m4a"):
        data = write_file(tone(0.3), RATE, tmp_path / f"book{suffix}").read_bytes()
        assert 0 < data.index(b"moov") < data.index(b"mdat"), suffix


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_empty_chunk_changes_nothing(fmt, decode_audio):
    """A sentence that made no samples (an empty chunk, int16 or float) neither breaks the stream nor changes it."""
    def stream(*chunks):
        encoder = open_encoder(fmt, RATE)
        return decode_audio(b"".join(encoder.encode(chunk) for chunk in chunks) + encoder.finish(), fmt)

    empty = np.zeros(0, np.int16)
    np.testing.assert_array_equal(stream(empty, tone(0.5), empty.astype(np.float32), tone(0.3)),
                                  stream(tone(0.5), tone(0.3)))
