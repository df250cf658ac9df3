"""Transcribing a reference clip when the user gave no transcript: Whisper through transformers,
only when its weights are already on this computer (never a silent download, never a guess)."""
from __future__ import annotations

import logging
import os
from functools import lru_cache

import numpy as np
import torch

log = logging.getLogger(__name__)

WHISPER_ID = os.environ.get("VOICEDESK_ASR_MODEL", "openai/whisper-large-v3-turbo")


def _local_whisper() -> str | None:
    """The local folder of the Whisper checkpoint, or None when it is not downloaded."""
    from huggingface_hub import snapshot_download

    if os.path.isdir(WHISPER_ID):
        return WHISPER_ID
    try:
        return snapshot_download(WHISPER_ID, local_files_only=True)
    except Exception:  # not in the cache (or a broken cache entry): no recogniser
        return None


@lru_cache(maxsize=2)
def _pipeline(folder: str, device: str):
    from transformers import pipeline

    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    return pipeline("automatic-speech-recognition", model=folder, dtype=dtype, device=device)


def asr_available() -> bool:
    return _local_whisper() is not None


def transcribe(wave: np.ndarray, sample_rate: int, device: torch.device) -> str | None:
    """Text spoken in `wave` (mono float32), or None when no recogniser is available here."""
    folder = _local_whisper()
    if folder is None:
        return None
    from engine.audio.resample import resample

    audio16k = resample(torch.from_numpy(wave)[None], sample_rate, 16000)[0].numpy()
    result = _pipeline(folder, str(device))({"raw": audio16k, "sampling_rate": 16000})
    text = (result.get("text") or "").strip()
    return text or None
