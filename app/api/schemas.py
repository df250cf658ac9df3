"""The request body of `POST /v1/audio/speech`: OpenAI's fields, then VoiceDesk's own extensions."""
from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.config import SETTING_RANGES

from ..settings import MAX_PICKED_SEED, RANGES
from .errors import ApiError

# Every name is served by the one loaded engine; OpenAI's are accepted so that existing clients work.
MODELS = ("omnivoice", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")


class VoiceRef(BaseModel):
    model_config = ConfigDict(strict=True)
    id: str


class SpeechRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    model: str
    input: str
    voice: str | VoiceRef
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(1.0, ge=SETTING_RANGES["speed"][1], le=SETTING_RANGES["speed"][2])
    instructions: str | None = None  # OmniVoice's voice design attributes, e.g. "female, low pitch"
    stream_format: Literal["audio", "sse"] = "audio"
    # VoiceDesk's extensions (None: the app's saved setting)
    language: str | None = None  # id or English name; None: detected by the model
    seed: int | None = Field(None, ge=0, le=MAX_PICKED_SEED)
    quality: Literal["hifi", "realtime"] | None = None  # must match the loaded mode
    steps: int | None = Field(None, ge=RANGES["steps"][0], le=RANGES["steps"][1])
    guidance: float | None = Field(None, ge=RANGES["guidance"][0], le=RANGES["guidance"][1])
    normalize: bool | None = None  # speak numbers, dates and currency as words (upstream's normalize_text)
    remove_pauses: bool | None = None  # shorten pauses over 0.5 s (upstream's postprocess_output)

    @property
    def voice_id(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice


def parse_speech(body: object) -> SpeechRequest:
    """The request, or ApiError 400 naming the first field that is wrong."""
    if not isinstance(body, dict):
        raise ApiError(400, "The body must be a JSON object.")
    request = validated(SpeechRequest, body)
    if request.model not in MODELS:
        raise ApiError(400, f"Unknown model '{request.model}': use one of {', '.join(MODELS)}.", param="model",
                       code="model_not_found")
    return request


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], body: dict) -> M:
    """`body` as a `model`, or ApiError 400 naming the first field that is wrong."""
    try:
        return model.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else None
        raise ApiError(400, f"{field}: {first['msg']}" if field else first["msg"], param=field) from None
