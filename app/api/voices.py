"""Which voice a request means: a saved voice of the library (by its id or name), or one of OpenAI's
built-in names, each mapped to a designed voice (an OmniVoice instruct). A saved voice wins over a
built-in name, so a voice saved as "Nova" is the one "nova" gets."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from engine.voice import Voice

from ..library import VoiceLibrary, requested_key
from .errors import ApiError

# OpenAI's voices, as voice design attributes in the spirit of each (documented in docs/api.md).
BUILTIN: dict[str, str] = {
    "alloy": "female, young adult, moderate pitch",
    "ash": "male, young adult, moderate pitch",
    "ballad": "male, young adult, high pitch",
    "coral": "female, young adult, high pitch",
    "echo": "male, young adult, low pitch",
    "fable": "male, middle-aged, moderate pitch, british accent",
    "onyx": "male, middle-aged, very low pitch",
    "nova": "female, young adult, high pitch, american accent",
    "sage": "female, middle-aged, low pitch",
    "shimmer": "female, young adult, very high pitch",
    "verse": "male, middle-aged, moderate pitch",
    "marin": "female, middle-aged, moderate pitch, american accent",
    "cedar": "male, middle-aged, low pitch, american accent",
}


@dataclass(frozen=True)
class ChosenVoice:
    voice: Voice | None  # a saved voice's tokens, or None for a designed voice
    instruct: str | None
    label: str  # for the history


def choose_voice(library: VoiceLibrary, voice_id: str, instructions: str | None) -> ChosenVoice:
    """The saved voice `voice_id` names (VoiceLibrary.match_voice: its folder name or name, loading only it), else
    the built-in name; raises ApiError 404 for a name that is neither (a damaged saved voice is neither: it does
    not shadow a built-in name). `instructions` design the voice (replacing a built-in name's attributes) or,
    with a saved voice, are passed along with it."""
    saved = library.match_voice(voice_id)
    if saved is not None:
        entry, voice = saved
        return ChosenVoice(voice, instructions, entry.name)
    wanted = requested_key(voice_id)
    if wanted in BUILTIN:
        instruct = instructions or BUILTIN[wanted]
        return ChosenVoice(None, instruct, f"{wanted} ({instruct})")
    raise ApiError(404, f"There is no voice '{voice_id}': GET /v1/audio/voices lists the saved voices and the "
                        f"built-in names ({', '.join(BUILTIN)}).", "voice", "voice_not_found")


def list_voices(library: VoiceLibrary) -> list[dict]:
    """OpenAI's voice objects: saved voices (`audio_sample`) first, then the built-in names (`prompt`)."""
    saved = [{"id": e.slug, "object": "audio.voice", "name": e.name, "type": "audio_sample",
              "created_at": _unix(e.created), "language": e.language} for e in library.entries()]
    builtin = [{"id": name, "object": "audio.voice", "name": name, "type": "prompt", "prompt": instruct,
                "created_at": 0} for name, instruct in BUILTIN.items()]
    return saved + builtin


def _unix(iso: str) -> int:
    try:
        return int(dt.datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return 0
