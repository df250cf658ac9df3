"""Transcribing speech (a reference clip without a transcript, a take for the words check):
Whisper through transformers, only when its weights are already on this computer (never a
silent download, never a guess)."""
from __future__ import annotations

import logging
import os
from functools import lru_cache

import numpy as np
import torch

from engine.hub import HubModel

log = logging.getLogger(__name__)

WHISPER = HubModel(os.environ.get("VOICEDESK_ASR_MODEL", "openai/whisper-large-v3-turbo"),
                   "transcripts of reference clips and the words check")


@lru_cache(maxsize=2)
def _pipeline(folder: str, device: str):
    from transformers import pipeline

    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    return pipeline("automatic-speech-recognition", model=folder, dtype=dtype, device=device)


def asr_available() -> bool:
    return WHISPER.local_folder() is not None


def transcribe(wave: np.ndarray, sample_rate: int, device: torch.device) -> str | None:
    """Text spoken in `wave` (mono float32), or None when no recogniser is available here."""
    folder = WHISPER.local_folder()
    if folder is None:
        return None
    from engine.audio.resample import resample

    audio16k = resample(torch.from_numpy(wave)[None], sample_rate, 16000)[0].numpy()
    result = _pipeline(folder, str(device))({"raw": audio16k, "sampling_rate": 16000})
    text = (result.get("text") or "").strip()
    return text or None
