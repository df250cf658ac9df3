"""engine.codec: the HiggsAudioV2 codec against upstream goldens, and its loading errors."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from error_budget import assert_as_accurate, assert_same_rounding, float64_codec
from safetensors.torch import load_file, save_file

from engine.audio import process
from engine.audio.io import load_clip
from engine.codec import AudioCodec
from engine.constants import DEMO_MODEL
from engine.errors import AudioInputError, CheckpointError

DATA = Path(__file__).parents[1] / "data"
CODEC_DIR = DEMO_MODEL / "audio_tokenizer"
GOLDENS = DATA / "goldens"


@pytest.fixture(scope="module")
def codec():
    return AudioCodec.load(CODEC_DIR)


@pytest.fixture(scope="module")
def codec64(codec):
    return float64_codec(codec)


@pytest.fixture(scope="module")
def internals():
    return load_file(GOLDENS / "codec.safetensors")


def test_shape_facts(codec):
    assert (codec.sample_rate, codec.frame_rate, codec.hop_length, codec.num_codebooks) == (24000, 25, 960, 8)


def test_the_codec_needs_no_torchaudio():
    """Nothing of ours looks for torchaudio when the codec loads (a library may: transformers does
    where torchaudio is installed, as on the GPU image). Watched in a fresh interpreter, since another
    test in this process may have imported it already: the finder records who asked for it."""
    code = """
import sys, traceback
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torchaudio":
            importer = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename][-1]
            print("asked by", importer.filename)
sys.meta_path.insert(0, Spy())
from engine.codec import AudioCodec
from engine.constants import DEMO_MODEL
AudioCodec.load(DEMO_MODEL / "audio_tokenizer")
"""
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr[-2000:]
    askers = [line.removeprefix("asked by ") for line in run.stdout.splitlines() if line.startswith("asked by ")]
    # ours: inside the checkout but not an installed package (CI's venv lives inside the checkout)
    ours = [path for path in askers
            if Path(path).resolve().is_relative_to(root) and "site-packages" not in Path(path).parts]
    assert not ours, askers


def test_encode_stages_and_tokens_match_upstream(codec, codec64, internals):
    """Each stage is as close to the float64 value as upstream's float32 golden is (any CPU: see error_budget)."""
    wave = internals["encode.input_values"][0, 0]
    semantic = codec._semantic_features(wave[None, None])
    semantic64 = codec64._semantic_features(wave.double()[None, None])
    assert_same_rounding(semantic, internals["encode.semantic_features"], semantic64, "semantic features")
    assert_same_rounding(codec.encoder_semantic(semantic.transpose(1, 2)), internals["encode.e_semantic"],
                         codec64.encoder_semantic(semantic64.transpose(1, 2)), "semantic encoder")
    assert_same_rounding(codec.acoustic_encoder(wave[None, None]), internals["encode.e_acoustic"],
                         codec64.acoustic_encoder(wave.double()[None, None]), "acoustic encoder")
    assert torch.equal(codec.encode(wave), internals["encode.audio_codes"][0])


def test_decode_matches_upstream(codec, codec64, internals):
    codes = internals["encode.audio_codes"][0]
    out = codec.decode(codes)
    want = internals["decode.audio_values"][0, 0]
    assert out.shape == want.shape == (960 * codes.shape[-1],)
    assert_same_rounding(out, want, codec64.decode(codes), "decode")


@pytest.mark.parametrize("name", ["voice_6s", "voice_2s", "voice_2s_stereo_44k", "voice_25s"])
def test_reference_tokens_match_upstream(codec, name):
    """File -> load -> prepare (with a transcript: no trimming) -> encode, as create_voice_clone_prompt."""
    meta = json.loads((GOLDENS / "audio.json").read_text())["clips"][name]
    ref = process.prepare_reference(load_clip(GOLDENS / meta["file"]).samples, trim_long=False)
    codes = codec.encode(torch.from_numpy(ref.samples))
    assert torch.equal(codes, load_file(GOLDENS / "audio.safetensors")[f"{name}.codes"])


def test_untranscribed_long_reference_tokens_match_upstream(codec):
    meta = json.loads((GOLDENS / "audio.json").read_text())
    clip = load_clip(GOLDENS / meta["clips"][meta["no_transcript_prompt"]["clip"]]["file"])
    codes = codec.encode(torch.from_numpy(process.prepare_reference(clip.samples).samples))
    assert torch.equal(codes, load_file(GOLDENS / "audio.safetensors")["voice_25s.no_transcript.codes"])


def test_encode_drops_the_partial_frame(codec):
    wave = torch.from_numpy(np.random.default_rng(0).standard_normal(3 * 960 + 500).astype(np.float32) * 0.2)
    codes = codec.encode(wave)
    assert codes.shape == (8, 3) and codes.dtype == torch.int64
    assert torch.equal(codes, codec.encode(wave[: 3 * 960]))
    assert int(codes.min()) >= 0 and int(codes.max()) < 1024
    with pytest.raises(AudioInputError, match="too short"):
        codec.encode(wave[:959])


# ---------------------------------------------------------------------------------------------
# loading


def copy_codec(tmp_path, edit=None):
    """The tiny codec folder copied to tmp_path, its tensors passed through `edit(dict)` first."""
    folder = tmp_path / "audio_tokenizer"
    folder.mkdir()
    shutil.copy(CODEC_DIR / "config.json", folder / "config.json")
    tensors = load_file(CODEC_DIR / "model.safetensors")
    if edit is not None:
        edit(tensors)
    save_file(tensors, folder / "model.safetensors")
    return folder


def test_weight_norm_pairs_are_folded(tmp_path, codec):
    def as_weight_norm(tensors):
        for name in ("acoustic_decoder.conv1", "acoustic_decoder.block.0.conv_t1"):
            weight = tensors.pop(f"{name}.weight")
            g = weight.norm(dim=(1, 2), keepdim=True)  # (C, 1, 1): norm per output (dim 0)
            tensors[f"{name}.weight_g"], tensors[f"{name}.weight_v"] = g, 3 * weight
        hubert = "semantic_model.encoder.pos_conv_embed.conv"
        g = tensors.pop(f"{hubert}.parametrizations.weight.original0")
        tensors[f"{hubert}.weight_g"] = g
        tensors[f"{hubert}.weight_v"] = tensors.pop(f"{hubert}.parametrizations.weight.original1")

    legacy = AudioCodec.load(copy_codec(tmp_path, as_weight_norm))
    for name, tensor in codec.state_dict().items():
        torch.testing.assert_close(legacy.state_dict()[name], tensor, atol=1e-6, rtol=1e-6, msg=name)


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.pop("fc2.bias"), r"missing: fc2\.bias"),
    (lambda t: t.update({"fc.weight": torch.zeros(3, 3)}), r"wrong shape: fc\.weight \(3, 3\) \(expected \(64, 64\)\)"),
    (lambda t: t.update({"extra.weight": torch.zeros(1)}), r"unexpected: extra\.weight"),
    (lambda t: t.pop("semantic_model.encoder.pos_conv_embed.conv.parametrizations.weight.original1"),
     r"missing: semantic_model\.encoder\.pos_conv_embed\.conv\.weight"),
])
def test_mismatched_tensors_name_file_and_tensor(tmp_path, edit, message):
    folder = copy_codec(tmp_path, edit)
    with pytest.raises(CheckpointError, match=message) as err:
        AudioCodec.load(folder)
    assert str(folder / "model.safetensors") in str(err.value)


def test_unused_training_tensors_are_accepted_and_change_nothing(tmp_path, codec, internals):
    folder = copy_codec(tmp_path, lambda t: t.update({"semantic_model.masked_spec_embed": torch.ones(32)}))
    loaded = AudioCodec.load(folder)
    wave, codes = internals["encode.input_values"][0, 0], internals["encode.audio_codes"][0]
    assert torch.equal(loaded.encode(wave), codes)  # upstream's tokens for upstream's input
    assert torch.equal(loaded.decode(codes), codec.decode(codes))


def test_broken_folders(tmp_path):
    with pytest.raises(CheckpointError, match=r"config .*config\.json is missing"):
        AudioCodec.load(tmp_path / "nowhere")
    folder = copy_codec(tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        AudioCodec.load(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors are missing"):
        AudioCodec.load(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot be read"):
        AudioCodec.load(folder)


@pytest.mark.parametrize("case", ["clone_6s", "auto_en"])
def test_generated_tokens_decode_and_finish_like_upstream(codec, codec64, case):
    """Upstream's _decode_and_post_process on tokens its generate() produced (one chunk)."""
    meta = json.loads((GOLDENS / "generate" / f"{case}.json").read_text())
    tensors = load_file(GOLDENS / "generate" / f"{case}.safetensors")
    assert meta["num_calls"] == 1
    decoded = codec.decode(tensors["call0.tokens"]).numpy()
    assert_same_rounding(decoded, tensors["audio_decoded"], codec64.decode(tensors["call0.tokens"]), case)
    cfg = meta["generation_config"]
    finished = process.finish_output(tensors["audio_decoded"].numpy(), meta["ref_rms"],
                                   remove_pauses=cfg["postprocess_output"],
                                   pad_s=cfg["pad_duration"], fade_s=cfg["fade_duration"])
    np.testing.assert_allclose(finished, tensors["audio"].numpy(), atol=1e-4, rtol=0)


@pytest.mark.parametrize("bad", [1024, -1])
def test_codes_out_of_range_are_refused(codec, bad):
    """The LM's MASK id (1024) or a negative code must never reach the codebook lookup."""
    codes = torch.randint(0, 1024, (8, 5))
    codes[3, 2] = bad
    with pytest.raises(ValueError, match=r"codec input out of range.*0\.\.1023"):
        codec.decode(codes)


@pytest.mark.parametrize("many", [False, True])
def test_the_range_is_read_after_the_decode_is_queued(codec, many, monkeypatch):
    """Reading the codes' range waits for the device (on a GPU: for the generation that made them), so it comes
    after the decoder's work is queued, and meanwhile the lookup gets codes clamped into range (a GPU's gather
    would fault on the MASK id): bad codes are still refused, and good ones decode as they did."""
    events, looked_up = [], []
    decoder_forward, lookup, check = codec.acoustic_decoder.forward, codec.quantizer.decode, codec._check_range
    monkeypatch.setattr(codec.acoustic_decoder, "forward", lambda *a, **k: events.append("decoder")
                        or decoder_forward(*a, **k))
    monkeypatch.setattr(codec.quantizer, "decode", lambda codes: looked_up.append(codes) or lookup(codes))
    monkeypatch.setattr(codec, "_check_range", lambda r: events.append("range read") or check(r))
    codes = torch.randint(0, 1024, (8, 5), generator=torch.Generator().manual_seed(1))
    bad = codes.clone()
    bad[3, 2] = 1024
    with pytest.raises(ValueError, match="out of range"):
        codec.decode_many([codes, bad]) if many else codec.decode(bad)
    assert events[0] == "decoder" and set(events[1:]) == {"range read"}, events
    assert max(int(c.max()) for c in looked_up) < codec.codebook_size
    looked_up.clear()
    codec.decode(codes)
    assert torch.equal(looked_up[0], codes)


def test_a_queued_decode_gives_decode_manys_waves_and_refuses_bad_codes_when_read(codec):
    """queue_decode waits for nothing: its waves (float32, on the host) equal decode_many's bit for bit, and codes out
    of range are refused when the waves are read, not before."""
    g = torch.Generator().manual_seed(9)
    pieces = [torch.randint(0, codec.codebook_size, (codec.num_codebooks, 12), generator=g) for _ in range(2)]
    for got, want in zip(codec.queue_decode(pieces).waves(), codec.decode_many(pieces)):
        assert got.dtype == torch.float32 and torch.equal(got, want.float())
    queued = codec.queue_decode([pieces[0], pieces[1] - 1 - pieces[1].max()])  # a piece with negative codes
    with pytest.raises(ValueError, match=r"out of range: codes -\d+\.\.-1"):
        queued.waves()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_queued_decode_on_another_gpu_than_the_threads_is_read_once_that_gpu_is_done():
    """An engine on cuda:1 queues its decodes from threads whose current device is cuda:0: the waves are read once
    cuda:1 has copied them (here behind a long kernel), not at once (cuda:0's stream holds none of that work)."""
    device = torch.device("cuda", 1)
    codec = AudioCodec.load(CODEC_DIR, device)
    g = torch.Generator().manual_seed(9)
    pieces = [torch.randint(0, codec.codebook_size, (codec.num_codebooks, 40), generator=g).to(device)
              for _ in range(2)]
    want = [wave.float().cpu() for wave in codec.decode_many(pieces)]
    with torch.cuda.device(0):
        with torch.cuda.device(device):
            torch.cuda._sleep(200_000_000)  # the generation the decode is queued behind: ~0.1 s on any GPU
        got = codec.queue_decode(pieces).waves()
    for got_wave, want_wave in zip(got, want):
        assert torch.equal(got_wave, want_wave)


def test_pieces_of_one_length_decode_together_as_well_as_one_by_one(codec, codec64):
    """Each piece of a batch rounds as well as its lone decode (the float64 codec is the exact value); pieces of
    different lengths are refused (padding would change the shorter ones' ends), as are codes out of range."""
    g = torch.Generator().manual_seed(5)
    pieces = [torch.randint(0, codec.codebook_size, (codec.num_codebooks, 30), generator=g) for _ in range(3)]
    together = codec.decode_many(pieces)
    for n, (piece, wave) in enumerate(zip(pieces, together)):
        assert_as_accurate(wave, codec.decode(piece), codec64.decode(piece), what=f"piece {n}")
    with pytest.raises(ValueError, match="one length"):
        codec.decode_many([pieces[0], pieces[1][:, :20]])
    with pytest.raises(ValueError, match="out of range"):
        codec.decode_many([pieces[0], pieces[1] + codec.codebook_size])
