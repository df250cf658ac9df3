"""The Realtime check: does Realtime, with this checkpoint on this GPU, speak as High fidelity does?

One fixed sentence in one designed voice, rendered deterministically (no random position choice, a fixed
seed) in both modes and compared: the share of equal audio tokens, the log-mel distance of the two clips
and, when the speaker model is on this computer, the speaker similarity of the two. A measure past its
limit makes the verdict "drift", and the app suggests High fidelity. The limits and how they were chosen:
docs/realtime_check.md."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import torch

from engine.checks.fidelity import mel_distance_db, token_agreement
from engine.checks.voice import SpeakerEncoder, similarity
from engine.config import GenerationConfig

if TYPE_CHECKING:
    from engine.engine import Engine, SynthesisResult

CHECK_TEXT = "Realtime speaks this sentence the same way as High fidelity, with every word in its place."
CHECK_INSTRUCT = "female, moderate pitch, american accent"  # a designed voice: nothing to ship or record
CHECK_SEED = 22

# The limits (docs/realtime_check.md): a Realtime that drifts from High fidelity by more than High
# fidelity's own FP16 rounding moved it from the fp32 path, at worst, on random weights.
MIN_TOKEN_AGREEMENT = 0.5  # share of equal (codebook, frame) tokens
MAX_MEL_DB = 3.0  # mean absolute log-mel difference
MIN_VOICE_SIMILARITY = 0.85  # cosine similarity of the two renders' speaker embeddings

Report = Callable[[str], None]
SpeakerSource = Callable[[], "tuple[SpeakerEncoder | None, str | None]"]  # the model, or None and why not


def check_config() -> GenerationConfig:
    """Deterministic settings: position_temperature 0 picks the positions to unmask by score alone
    (class_temperature is 0 by default: each token is its argmax), so a render depends only on the model."""
    return GenerationConfig(position_temperature=0.0, seed=CHECK_SEED)


@dataclass(frozen=True)
class RealtimeCheck:
    """How far Realtime's render of the check sentence is from High fidelity's."""

    token_agreement: float  # 1.0: every audio token equal
    mel_db: float  # 0.0: the same spectrogram
    voice_similarity: float | None  # None: not measured, `voice_skipped` says why
    voice_skipped: str | None = None

    @property
    def drifted(self) -> list[str]:
        """The measures past their limit (each limit itself still passes)."""
        past = []
        if self.token_agreement < MIN_TOKEN_AGREEMENT:
            past.append("tokens")
        if self.mel_db > MAX_MEL_DB:
            past.append("mel")
        if self.voice_similarity is not None and self.voice_similarity < MIN_VOICE_SIMILARITY:
            past.append("voice")
        return past

    @property
    def verdict(self) -> str:
        return "drift" if self.drifted else "fine"

    def summary(self) -> str:
        """'tokens 97 % equal to High fidelity, mel 0.8 dB, voice 0.98: fine'."""
        voice = f", voice {self.voice_similarity:.2f}" if self.voice_similarity is not None else ""
        return f"tokens {_percent(self.token_agreement)} equal to High fidelity, mel {self.mel_db:.1f} dB{voice}: " \
               f"{self.verdict}"

    def limits_crossed(self) -> str:
        """What is past its limit, in words: 'tokens 31 % equal (at least 50 %)'; empty when fine."""
        said = {"tokens": f"tokens {_percent(self.token_agreement)} equal (at least {_percent(MIN_TOKEN_AGREEMENT)})",
                "mel": f"mel {self.mel_db:.1f} dB (at most {MAX_MEL_DB:.1f} dB)",
                "voice": f"voice {self.voice_similarity or 0:.2f} (at least {MIN_VOICE_SIMILARITY:.2f})"}
        return ", ".join(said[name] for name in self.drifted)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict) -> RealtimeCheck:
        return cls(token_agreement=float(value["token_agreement"]), mel_db=float(value["mel_db"]),
                   voice_similarity=None if value.get("voice_similarity") is None else float(value["voice_similarity"]),
                   voice_skipped=value.get("voice_skipped"))


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


def render_check_sentence(engine: Engine, cancel=None) -> SynthesisResult:
    return engine.synthesize(CHECK_TEXT, instruct=CHECK_INSTRUCT, config=check_config(), cancel=cancel)


def measure(realtime: SynthesisResult, hifi: SynthesisResult, speaker: SpeakerEncoder | None, *,
            no_voice: str | None = None) -> RealtimeCheck:
    """Compare two renders of the check sentence; `no_voice`: why there is no `speaker` model."""
    tokens, reference = torch.cat(realtime.tokens, dim=-1), torch.cat(hifi.tokens, dim=-1)  # [8, T]
    agreement = token_agreement(tokens, reference)
    mel = mel_distance_db(realtime.audio, hifi.audio, realtime.sample_rate)
    if speaker is None:
        return RealtimeCheck(agreement, mel, None, no_voice or "no speaker model")
    voice = similarity(speaker.embed(realtime.audio, realtime.sample_rate), speaker.embed(hifi.audio, hifi.sample_rate))
    return RealtimeCheck(agreement, mel, voice)


def check_realtime(realtime: Engine, load_hifi: Callable[[], Engine], speaker: SpeakerSource, *,
                   report: Report = lambda message: None, cancel=None) -> RealtimeCheck:
    """Render the check sentence with the loaded Realtime engine, then with a High fidelity engine of the same
    checkpoint on the same device (`load_hifi`, released afterwards: both are in memory only meanwhile)."""
    report("rendering the check sentence in Realtime")
    ours = render_check_sentence(realtime, cancel)
    report("loading High fidelity beside it")
    hifi = load_hifi()
    try:
        report("rendering the check sentence in High fidelity")
        theirs = render_check_sentence(hifi, cancel)
    finally:
        device = hifi.device
        del hifi
        _release(device)
    report("comparing the two")
    encoder, why = speaker()
    return measure(ours, theirs, encoder, no_voice=why)


def _release(device: torch.device) -> None:
    """Give back what a dropped engine held: its CUDA graphs and memory pool."""
    if device.type != "cuda":
        return
    from engine.lm.runner import freeze_heap

    freeze_heap()  # collects the engine's reference cycles, which the last freeze exempted
    torch.cuda.empty_cache()
