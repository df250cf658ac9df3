"""The voice check: speaker similarity of a take and the reference, with a speaker-verification
model through transformers (WavLM-Base-Plus with an x-vector head, fine-tuned on VoxCeleb1:
`microsoft/wavlm-base-plus-sv`, about 95 M parameters). Why this one: docs/checks.md."""
from __future__ import annotations

import os

import numpy as np
import torch

from engine.checks.verdict import Check
from engine.hub import HubModel

SPEAKER_MODEL = HubModel(os.environ.get("VOICEDESK_SPEAKER_MODEL", "microsoft/wavlm-base-plus-sv"),
                         "the voice check (speaker similarity)")
MODEL_RATE = 16000


class SpeakerEncoder:
    """Unit-length speaker embeddings of clips."""

    def __init__(self, folder: str, device: torch.device | str = "cpu"):
        from transformers import AutoFeatureExtractor, AutoModelForAudioXVector

        self.device = torch.device(device)
        self.extractor = AutoFeatureExtractor.from_pretrained(folder)
        self.model = AutoModelForAudioXVector.from_pretrained(folder).to(self.device).eval()

    def embed(self, wave: np.ndarray, sample_rate: int) -> torch.Tensor:
        """[D] fp32 unit vector of a mono float clip. One clip per forward: batching pads, and
        the encoder's group norm would see the padding."""
        from engine.audio.resample import resample

        audio16k = resample(torch.from_numpy(np.ascontiguousarray(wave, np.float32))[None], sample_rate,
                            MODEL_RATE)[0].numpy()
        inputs = self.extractor(audio16k, sampling_rate=MODEL_RATE, return_tensors="pt")
        with torch.inference_mode():
            out = self.model(**{k: v.to(self.device) for k, v in inputs.items()}).embeddings  # [1, D]
        return torch.nn.functional.normalize(out.float(), dim=-1)[0].cpu()


def similarity(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two embeddings (1 = same direction)."""
    return float(torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-12))


def check_voice(take: torch.Tensor, reference: torch.Tensor, min_similarity: float) -> Check:
    score = similarity(take, reference)
    passed = score >= min_similarity
    detail = "" if passed else f"sounds like another speaker (similarity {score:.2f} < {min_similarity:.2f})"
    return Check("voice", score, min_similarity, passed, detail)
