"""Test-session setup that must happen before any test module is imported, and the tiny RANDOM-weight
helper models (a WavLM x-vector speaker model, a Whisper recogniser) written into tmp folders: they
exercise the real loading and inference code of the take checks, not the real models' accuracy
(docs/checks.md)."""
import atexit
import json
import os
import shutil
import tempfile

import pytest
import torch

# Everything the app and the engine keep on disk (caches of quantized models and kernels included) goes to
# a throwaway folder, never into the user's real VoiceDesk folders. The process that made it removes it when it
# ends (pytest-xdist's workers inherit the folder from the main process, which ends after them).
if "VOICEDESK_HOME" not in os.environ:
    os.environ["VOICEDESK_HOME"] = tempfile.mkdtemp(prefix="voicedesk-tests-")
    atexit.register(shutil.rmtree, os.environ["VOICEDESK_HOME"], ignore_errors=True)

if not torch.cuda.is_available():
    # Without a GPU, Triton kernels can only run in its interpreter, which Triton (its own reductions
    # included) picks when it is first imported: engine/ modules import kernels/, so set it here.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _checkout_changes() -> set[str] | None:
    """`git status --porcelain` lines of the checkout the tests run in (None outside a git checkout)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                          capture_output=True, text=True, check=False)
    return set(done.stdout.splitlines()) if done.returncode == 0 else None


def pytest_sessionstart(session):
    session.config._checkout_before = _checkout_changes()


def pytest_sessionfinish(session, exitstatus):
    """Tests write nothing inside the checkout: a run that leaves a new change in `git status` fails."""
    before = getattr(session.config, "_checkout_before", None)
    after = _checkout_changes()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        session.config.get_terminal_writer().line(
            "\nFAILED: the tests changed the checkout (`git status`):\n  " + "\n  ".join(new), red=True)
        session.exitstatus = 1


@pytest.fixture(scope="session")
def tiny_speaker_model(tmp_path_factory) -> str:
    """A random WavLMForXVector (hidden 32, 2 layers) with its feature extractor, ~140 kB."""
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMForXVector

    folder = tmp_path_factory.mktemp("tiny_wavlm_sv")
    cfg = WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                      conv_dim=(16, 16, 16), conv_stride=(5, 4, 4), conv_kernel=(10, 4, 4),
                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, num_buckets=32,
                      max_bucket_distance=100, tdnn_dim=(16, 16, 16), tdnn_kernel=(5, 3, 1),
                      tdnn_dilation=(1, 2, 1), xvector_output_dim=8)
    torch.manual_seed(0)
    WavLMForXVector(cfg).save_pretrained(folder)
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                             return_attention_mask=True).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory) -> str:
    """A random Whisper (d_model 32, one layer each side) with a byte-level tokenizer, ~400 kB."""
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizer,
    )
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    folder = tmp_path_factory.mktemp("tiny_whisper")
    (folder / "vocab.json").write_text(json.dumps({ch: i for i, ch in enumerate(bytes_to_unicode().values())}))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = WhisperTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tokenizer.add_special_tokens({"additional_special_tokens": [
        "<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
        "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]})
    tokenizer.save_pretrained(folder)
    ids = tokenizer.convert_tokens_to_ids
    special = dict(decoder_start_token_id=ids("<|startoftranscript|>"), eos_token_id=ids("<|endoftext|>"),
                   pad_token_id=ids("<|endoftext|>"))
    cfg = WhisperConfig(vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_target_positions=64, bos_token_id=special["eos_token_id"],
                        **special)
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(max_length=12, no_timestamps_token_id=ids("<|notimestamps|>"),
                                               **special)
    model.save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def engine():
    """The demo checkpoint on the CPU's eager reference path, one per test module (tests spy on it and patch it);
    a module that needs another engine defines its own `engine`."""
    from engine.constants import DEMO_MODEL
    from engine.engine import Engine

    return Engine.load(DEMO_MODEL, device="cpu", mode="eager")


@pytest.fixture(scope="module")
def voice(engine):
    """A voice made by `engine` from a 2 s synthetic clip and its transcript."""
    from engine.constants import SAMPLE_RATE
    from tools.workloads import synthetic_voice

    return engine.voice_from_clip((synthetic_voice(2.0), SAMPLE_RATE), "A synthetic voice for the test.")
