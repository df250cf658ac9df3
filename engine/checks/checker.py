"""Runs every check of a take that can run here. Words and voice need their models on this
computer (never downloaded from here: see engine/hub.py); a check that cannot run is skipped with
the reason, and the others still run."""
from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch

from engine.checks.signal import check_signal
from engine.checks.verdict import Thresholds, Verdict
from engine.checks.voice import SPEAKER_MODEL, SpeakerEncoder, check_voice
from engine.checks.words import check_words

Transcribe = Callable[[np.ndarray, int], "str | None"]


class Checker:
    def __init__(self, transcribe: Transcribe | None, speaker: SpeakerEncoder | None,
                 unavailable: dict[str, str] | None = None):
        self.transcribe, self.speaker = transcribe, speaker
        self.unavailable = dict(unavailable or {})  # check name -> why it cannot run here
        # generations checked side by side (their takes batched) take turns here: the recogniser's pipeline is
        # built on first use and neither it nor the models are made for calls from several threads at once
        self._turn = threading.Lock()

    @classmethod
    def load(cls, device: torch.device | str) -> Checker:
        """The checks this computer can run: the speech recogniser and speaker model if present."""
        from engine.audio.asr import WHISPER, transcribe

        unavailable = {}
        words = None
        if WHISPER.local_folder() is not None:
            def words(wave, rate):
                return transcribe(wave, rate, torch.device(device))
        else:
            unavailable["words"] = f"the speech recogniser ({WHISPER.repo_id}) is not on this computer"
        folder = SPEAKER_MODEL.local_folder()
        speaker = SpeakerEncoder(folder, device) if folder is not None else None
        if speaker is None:
            unavailable["voice"] = f"the speaker model ({SPEAKER_MODEL.repo_id}) is not on this computer"
        return cls(words, speaker, unavailable)

    def embed(self, wave: np.ndarray, sample_rate: int) -> torch.Tensor | None:
        """The speaker embedding of a reference clip, or None without a speaker model."""
        with self._turn:
            return self.speaker.embed(wave, sample_rate) if self.speaker is not None else None

    def embed_reference(self, wave: Callable[[], np.ndarray], sample_rate: int) -> torch.Tensor | None:
        """`embed(wave())`, with the clip made (a voice's reference rendered by the codec) only when there is a
        speaker model to embed it."""
        return self.embed(wave(), sample_rate) if self.speaker is not None else None

    def check(self, wave: np.ndarray, sample_rate: int, text: str, thresholds: Thresholds, *,
              reference: torch.Tensor | None = None, language: str | None = None) -> Verdict:
        """Every check that can run on one take of `text`."""
        verdict = Verdict(skipped=dict(self.unavailable))
        with self._turn:
            if self.transcribe is not None:
                heard = self.transcribe(wave, sample_rate) or ""
                verdict.checks.append(check_words(text, heard, thresholds.max_wer, language))
            if self.speaker is not None and reference is None:
                verdict.skipped["voice"] = "no reference voice to compare with"
            elif self.speaker is not None:
                take = self.speaker.embed(wave, sample_rate)
                verdict.checks.append(check_voice(take, reference, thresholds.min_similarity))
        verdict.checks += check_signal(wave, sample_rate, thresholds)
        return verdict
