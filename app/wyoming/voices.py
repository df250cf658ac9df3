"""What the Wyoming server offers and how a request names it: the saved voices of the library (by folder name,
shown by their own names) and the designed presets (OpenAI's names with their attributes, app/api/voices.py),
every one in every language the model knows; a request's voice name is resolved as the API resolves it."""
from __future__ import annotations

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from engine.text.languages import language_ids

from ..api.errors import ApiError
from ..api.voices import BUILTIN, ChosenVoice, choose_voice
from ..library import VoiceLibrary

PROGRAM = "voicedesk"
ATTRIBUTION = Attribution(name="VoiceDesk (OmniVoice by k2-fsa)", url="https://github.com/k2-fsa/OmniVoice")
AUTOMATIC = ChosenVoice(None, None, "automatic voice")


class UnknownVoice(Exception):
    """A voice name that is neither saved nor a preset."""


def describe(library: VoiceLibrary, version: str) -> Info:
    """The `info` answer: one text-to-speech program that takes streamed text."""
    languages = sorted(language_ids())

    def voice(name: str, description: str) -> TtsVoice:
        return TtsVoice(name=name, description=description, attribution=ATTRIBUTION, installed=True,
                        version=version, languages=languages)

    saved = [voice(entry.slug, entry.name) for entry in library.entries()]
    presets = [voice(name, f"{name} (designed: {attributes})") for name, attributes in BUILTIN.items()]
    program = TtsProgram(name=PROGRAM, description="Local voice cloning: your saved voices", attribution=ATTRIBUTION,
                         installed=True, version=version, voices=saved + presets, supports_synthesize_streaming=True)
    return Info(tts=[program])


def chosen_voice(library: VoiceLibrary, name: str | None) -> ChosenVoice:
    """The voice a request names (a saved voice wins over a preset of the same name); no name: the automatic
    voice. Raises UnknownVoice."""
    if name is None or not name.strip():
        return AUTOMATIC
    try:
        return choose_voice(library, name, None)
    except ApiError:
        raise UnknownVoice(f"There is no voice '{name}' here: the info event lists the saved voices and the "
                           "presets.") from None


def language_hint(language: str | None) -> str | None:
    """A request's language as the model's id ("en_US" and "en-US" are "en"), or None to let the model tell."""
    if not language:
        return None
    ids = language_ids()
    for candidate in (language, language.replace("_", "-").split("-")[0].lower()):
        if candidate in ids:
            return candidate
    return None
