"""One synthesis request as the engine passes it along: what to say, in which voice, how.

`instruct` and `language` are both optional strings, so every field is keyword-only: a request
cannot be built with the two swapped by position, and the chain from the UI to the runner passes
this one object instead of six positional arguments."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.config import GenerationConfig
from engine.voice import Voice


@dataclass(frozen=True, kw_only=True)
class SpeechRequest:
    text: str
    voice: Voice | None = None  # a reference voice, or None (designed by `instruct`, or automatic)
    instruct: str | None = None  # a voice description such as "female, low pitch"
    language: str | None = None  # a language name or id; None = guess from nothing (language-agnostic)
    config: GenerationConfig = field(default_factory=GenerationConfig)

    def with_seed(self, seed: int) -> SpeechRequest:
        return replace(self, config=self.config.replace(seed=seed))

    def with_config(self, config: GenerationConfig) -> SpeechRequest:
        return replace(self, config=config)
