"""End to end through the facade (clip file -> Voice -> synthesize) against upstream OmniVoice's
final audio, recorded on the tiny checkpoint (tests/data/goldens/generate, requests with audio)."""
import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
from error_budget import ORDER_FACTOR, ULPS, float64_codec, max_error
from extras import with_tn_marks
from safetensors.torch import load_file

from engine.config import GenerationConfig

GOLDENS = Path(__file__).parents[1] / "data" / "goldens"
REQUESTS = sorted(p.stem for p in (GOLDENS / "generate").glob("*.json"))
WITH_AUDIO = [name for name in REQUESTS
              if json.loads((GOLDENS / "generate" / f"{name}.json").read_text(encoding="utf-8"))["audio_stored"]]
CONFIG_KEYS = {f.name for f in fields(GenerationConfig)} - {"seed"}


def test_there_are_end_to_end_goldens():
    assert {"clone_6s", "auto_en", "chunked_auto", "chunked_auto_3", "no_preprocess", "transcript_as_typed",
            "pad_fade", "no_pad_fade", "normalize_en"} <= set(WITH_AUDIO)


def run_like_upstream(engine, name):
    """Upstream's recorded request through our facade: (its metadata, its tensors, our result)."""
    meta = json.loads((GOLDENS / "generate" / f"{name}.json").read_text(encoding="utf-8"))
    request = meta["request"]
    settings = {**meta["generation_config"], **request}
    cfg = GenerationConfig(**{k: v for k, v in settings.items() if k in CONFIG_KEYS}, seed=meta["torch_seed"])
    voice = None
    if request.get("ref_audio"):
        voice = engine.voice_from_clip(GOLDENS / request["ref_audio"], transcript=request.get("ref_text"),
                                       preprocess=cfg.preprocess_prompt)
    result = engine.synthesize(request["text"], voice=voice, instruct=request.get("instruct"),
                               language=request.get("language"), config=cfg)
    return meta, load_file(str(GOLDENS / "generate" / f"{name}.safetensors")), result


@pytest.mark.parametrize("name", with_tn_marks(REQUESTS))
def test_every_request_gives_upstreams_tokens(engine, name):
    """Transcript handling, normalisation, planning, chunk chaining and seeded sampling, all through the facade."""
    meta, golden, result = run_like_upstream(engine, name)
    assert len(result.tokens) == meta["num_calls"]
    for i, tokens in enumerate(result.tokens):
        assert tokens.tolist() == golden[f"call{i}.tokens"].tolist(), f"call {i}"


@pytest.mark.parametrize("name", with_tn_marks(WITH_AUDIO))
def test_final_audio_matches_upstream(engine, name):
    meta, golden, result = run_like_upstream(engine, name)
    expected = golden["audio"].numpy()
    assert result.audio.shape == expected.shape
    np.testing.assert_allclose(result.audio, expected, rtol=0, atol=finished_audio_tolerance(engine, meta, golden))


def finished_audio_tolerance(engine, meta, golden) -> float:
    """How far two CPUs' float32 results may differ after decode + finishing (see tests/error_budget.py).

    The decode's rounding is bounded as in test_codec (float64 decode of the same tokens); finishing
    scales it by its gain (loudness, peak normalisation; fades only shrink it) and truncates to 16 bits,
    where a value near a step may land one step either side."""
    codec64 = float64_codec(engine.codec)
    decode_error = 0.0
    for i in range(meta["num_calls"]):
        tokens = golden[f"call{i}.tokens"]
        decode_error = max(decode_error, max_error(engine.codec.decode(tokens), codec64.decode(tokens)))
    peak = torch.finfo(torch.float32).eps * golden["audio_decoded"].abs().max().item()
    gain = golden["audio"].abs().max().item() / golden["audio_decoded"].abs().max().item()
    return gain * (ORDER_FACTOR * decode_error + ULPS * peak) + 2 / 32768
