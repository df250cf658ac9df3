"""Voice files: our format and upstream's prompt files are read without running code, and a crafted file
(another version, codes the codec does not have, a wrong shape) is refused with a clear error."""
import json

import pytest
import torch
from safetensors.torch import save_file

from engine.errors import AudioInputError
from engine.voice import META_FILE, TOKENS_FILE, Voice, VoiceMetaError

GOOD = torch.randint(0, 1024, (8, 30))


def saved(tmp_path, tokens=GOOD, **meta_changes):
    folder = tmp_path / "voice"
    Voice(tokens=GOOD, transcript="Hello.", rms=0.05).save(folder)
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    (folder / META_FILE).write_text(json.dumps({**meta, **meta_changes}), encoding="utf-8")
    save_file({"tokens": tokens.contiguous()}, str(folder / TOKENS_FILE))
    return folder


def test_a_saved_voice_reads_back(tmp_path):
    back = Voice.load(saved(tmp_path))
    assert torch.equal(back.tokens, GOOD) and back.transcript == "Hello." and back.rms == 0.05


def test_the_transcript_reads_back_without_the_tokens_being_loaded(tmp_path, monkeypatch):
    """voice.json and the tokens file's header only: what the library's voice lists read of each voice."""
    folder = saved(tmp_path)

    def no_load(*args, **kwargs):
        raise AssertionError("the tokens were loaded")

    monkeypatch.setattr("engine.voice.load_file", no_load)
    assert Voice.saved_transcript(folder) == "Hello."


VOICE_JSON = '{"format": "voicedesk-voice", "version": 1, "transcript": "Hello.", "rms": 0.05'
BAD_VOICE_JSON = {  # voice.json's bytes -> the start of what is said of it, after its path
    "version 2": (VOICE_JSON.replace('"version": 1', '"version": 2') + "}",
                  "has version 2; this VoiceDesk reads voices of version 1"),
    "version '1'": (VOICE_JSON.replace('"version": 1', '"version": "1"') + "}",
                    "has version '1'; this VoiceDesk reads voices of version 1"),
    "no version": (VOICE_JSON.replace('"version": 1, ', "") + "}",
                   "has no version; this VoiceDesk reads voices of version 1"),
    "another format": (VOICE_JSON.replace("voicedesk-voice", "something-else") + "}",
                       'does not describe a VoiceDesk voice (no "format": "voicedesk-voice")'),
    "a list": ("[1, 2]", 'does not describe a VoiceDesk voice (no "format": "voicedesk-voice")'),
    "not JSON": ("{oops", "is not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    "not UTF-8": (b"\xff\xfe", "is not text (UTF-8)"),
    "nested too deep": ("[" * 100_000, "cannot be read (maximum recursion depth exceeded"),
    "5000 digits": (VOICE_JSON + ', "v": ' + "1" * 5000 + "}", "cannot be read (Exceeds the limit"),
}


@pytest.mark.parametrize("case", BAD_VOICE_JSON)
def test_a_voice_json_of_another_format_or_version_or_unreadable_is_refused_saying_why(tmp_path, case):
    """`problem` says it without the path, for the import to name the file the person imported."""
    content, said = BAD_VOICE_JSON[case]
    folder = saved(tmp_path)
    meta_file = folder / META_FILE
    meta_file.write_bytes(content.encode() if isinstance(content, str) else content)
    for read in (Voice.load, Voice.saved_transcript):
        with pytest.raises(VoiceMetaError) as caught:
            read(folder)
        assert str(caught.value).startswith(f"{meta_file} {said}") and caught.value.problem.startswith(said)


def test_a_missing_voice_json_is_refused(tmp_path):
    folder = saved(tmp_path)
    (folder / META_FILE).unlink()
    for read in (Voice.load, Voice.saved_transcript):
        with pytest.raises(VoiceMetaError, match=r"voice.json cannot be read \(No such file or directory\)\.$"):
            read(folder)


NO_LOUDNESS = {"text": "loud", "a list": [0.1], "400 digits": 10**400, "negative": -0.05, "NaN": float("nan"),
               "infinite": float("inf"), "minus infinity as text": "-inf"}


@pytest.mark.parametrize("case", NO_LOUDNESS)
def test_a_loudness_that_is_no_number_of_0_or_more_is_refused_as_a_voice_json_problem(tmp_path, case):
    """It was told as the tokens' problem (an import: "voice.safetensors ... holds no usable voice"). A negative one
    flipped the output's sign (minus infinity made it NaN)."""
    folder = saved(tmp_path, rms=NO_LOUDNESS[case])
    said = 'gives a loudness ("rms") that is not a number of 0 or more'
    for read in (Voice.load, Voice.saved_transcript):
        with pytest.raises(VoiceMetaError) as caught:
            read(folder)
        assert str(caught.value) == f"{folder / META_FILE} {said}." and caught.value.problem == said


@pytest.mark.parametrize("rms, loudness", [(None, None), (0, 0.0), (0.05, 0.05), ("0.05", 0.05)],
                         ids=["null", "zero", "a number", "a number as text"])
def test_a_loudness_of_0_or_more_or_none_reads_back(tmp_path, rms, loudness):
    """None: a voice made from generated audio, which has no loudness to match."""
    folder = saved(tmp_path, rms=rms)
    assert Voice.load(folder).rms == loudness and Voice.saved_transcript(folder) == "Hello."


BAD_TOKENS = {
    "mask id": GOOD.clone().index_fill_(1, torch.tensor([3]), 1024),
    "negative": GOOD.clone().index_fill_(1, torch.tensor([0]), -1),
    "float": GOOD.float(),
    "seven codebooks": GOOD[:7],
    "no frames": GOOD[:, :0],
    "one dimension": GOOD.flatten(),
    "complex": GOOD.to(torch.complex64),
    "unsigned, past 1023": (GOOD + 1000).to(torch.uint16),
}


@pytest.mark.parametrize("case", BAD_TOKENS)
def test_tokens_the_codec_does_not_have_are_refused(tmp_path, case):
    with pytest.raises(AudioInputError, match=r"voice tokens must be"):
        Voice.load(saved(tmp_path, tokens=BAD_TOKENS[case]))


TORN = {"cut short": lambda b: b[:-1], "cut in its header": lambda b: b[:50], "empty": lambda b: b""}


@pytest.mark.parametrize("case", TORN)
def test_a_tokens_file_cut_short_is_refused_without_loading_it(tmp_path, case):
    """safetensors' header says how long the file is: `saved_transcript` refuses, as `load` does, from it alone."""
    folder = saved(tmp_path)
    (folder / TOKENS_FILE).write_bytes(TORN[case]((folder / TOKENS_FILE).read_bytes()))
    for read in (Voice.load, Voice.saved_transcript):
        with pytest.raises(AudioInputError, match="cannot be read"):
            read(folder)


def test_a_tokens_file_missing_or_without_tokens_is_refused(tmp_path):
    folder = saved(tmp_path)
    save_file({"codes": GOOD}, str(folder / TOKENS_FILE))
    for read in (Voice.load, Voice.saved_transcript):
        with pytest.raises(AudioInputError, match="cannot be read"):
            read(folder)
    (folder / TOKENS_FILE).unlink()
    for read in (Voice.load, Voice.saved_transcript):
        with pytest.raises(AudioInputError, match="cannot be read"):
            read(folder)


CODES_OUT_OF_RANGE = ("mask id", "negative", "unsigned, past 1023")


@pytest.mark.parametrize("case", BAD_TOKENS)
def test_tokens_of_no_codec_layout_are_refused_from_the_header_and_codes_out_of_range_only_by_load(tmp_path, case):
    """The shape and type are in the tokens file's header; the codes' values only in its data, which
    `saved_transcript` does not read."""
    folder = saved(tmp_path, tokens=BAD_TOKENS[case])
    if case in CODES_OUT_OF_RANGE:
        assert Voice.saved_transcript(folder) == "Hello."
    else:
        with pytest.raises(AudioInputError, match=r"voice tokens must be"):
            Voice.saved_transcript(folder)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64, torch.int16, torch.uint8, torch.int8],
                         ids=str)
def test_codes_of_any_integer_type_read_back(tmp_path, dtype):
    """PyTorch has no min/max for the wider unsigned types: their NotImplementedError escaped Voice.load, and the
    library's list (which lists an unreadable voice as damaged) raised with it. int8 codes were refused: 1023
    compared as an int8 is -1."""
    codes = GOOD % 128 if dtype in (torch.int8, torch.uint8) else GOOD
    back = Voice.load(saved(tmp_path, tokens=codes.to(dtype)))
    assert back.tokens.dtype == torch.int64 and torch.equal(back.tokens, codes)


@pytest.mark.parametrize("case", ["mask id", "negative", "seven codebooks"])
def test_upstream_prompt_files_are_checked_the_same_way(tmp_path, case):
    path = tmp_path / "prompt.pt"
    torch.save({"format_version": 1, "ref_audio_tokens": BAD_TOKENS[case], "ref_text": "Hi.", "ref_rms": 0.1}, path)
    with pytest.raises(AudioInputError, match=r"voice tokens must be"):
        Voice.from_upstream_prompt(path)
    torch.save({"format_version": 2, "ref_audio_tokens": GOOD, "ref_text": "Hi.", "ref_rms": 0.1}, path)
    with pytest.raises(AudioInputError, match="format_version 1"):
        Voice.from_upstream_prompt(path)


@pytest.mark.parametrize("rms", ["loud", -0.1, float("nan")], ids=["text", "negative", "NaN"])
def test_an_upstream_prompt_of_no_loudness_number_is_refused(tmp_path, rms):
    path = tmp_path / "prompt.pt"
    torch.save({"format_version": 1, "ref_audio_tokens": GOOD, "ref_text": "Hi.", "ref_rms": rms}, path)
    with pytest.raises(AudioInputError, match=r"prompt.pt: the voice's loudness \(rms\) is not a number of 0 or more"):
        Voice.from_upstream_prompt(path)
    torch.save({"format_version": 1, "ref_audio_tokens": GOOD, "ref_text": "Hi.", "ref_rms": 0.1}, path)
    assert Voice.from_upstream_prompt(path).rms == pytest.approx(0.1)


class Payload:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_prompt_file_that_would_run_code_is_refused(tmp_path, capsys):
    path = tmp_path / "prompt.pt"
    torch.save({"format_version": 1, "ref_audio_tokens": GOOD, "ref_text": Payload(), "ref_rms": 0.1}, path)
    with pytest.raises(AudioInputError, match="not a readable OmniVoice voice prompt"):
        Voice.from_upstream_prompt(path)
    assert "must never run" not in capsys.readouterr().out
