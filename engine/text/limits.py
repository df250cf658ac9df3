"""How much text the engine accepts, per input. The one home of these limits: the engine enforces them
itself (`Engine.synthesize`, `stream`, `voice_from_clip`), so the UI, the HTTP API, the CLI and the
OpenAI-compatible API cannot skip them, and the UI shows the same numbers in its counters.

Why these numbers: the text streams sentence by sentence, so its limit only bounds the whole job
(50,000 characters is about an hour of speech); the reference transcript is read again with every
chunk and attention grows with its square, so it is held to what a 60 s reference clip can hold
(fast speech is ~20 characters a second); a voice-design instruct is a few short attributes.
"""
from __future__ import annotations

from engine.errors import TextInputError

MAX_TEXT_CHARS = 50_000  # the text to speak
MAX_TRANSCRIPT_CHARS = 2_000  # the reference clip's transcript
MAX_INSTRUCT_CHARS = 500  # voice-design attributes, e.g. "female, low pitch, british accent"

_ADVICE = {
    "text": "split it into several requests",
    "transcript": "type only what is said in the reference clip (at most 60 s of it is used)",
    "voice description": "use a few short attributes, e.g. 'female, low pitch'",
}


def check_length(value: str | None, limit: int, what: str) -> None:
    """Raise TextInputError when `value` is a string longer than `limit` characters.

    `what` names the input in the message: "text", "transcript" or "voice description"."""
    if isinstance(value, str) and len(value) > limit:
        raise TextInputError(f"The {what} is {len(value):,} characters long; the limit is {limit:,}: "
                             f"{_ADVICE[what]}.")


def check_request(text: str | None, transcript: str | None = None, instruct: str | None = None) -> None:
    """Check every text input of one synthesis request against its limit."""
    check_length(text, MAX_TEXT_CHARS, "text")
    check_length(transcript, MAX_TRANSCRIPT_CHARS, "transcript")
    check_length(instruct, MAX_INSTRUCT_CHARS, "voice description")
