"""User settings in one JSON file that the app and the command line both read."""
from __future__ import annotations

import logging
import secrets
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import MappingProxyType

from engine.checks.policy import CheckMode
from engine.config import DEFAULT_MODE, MODE_NAMES, GenerationConfig
from engine.errors import SettingError
from engine.text.languages import language_ids
from engine.text.normalize import normalize_available

from .storage import atomic_write_json, read_json

log = logging.getLogger(__name__)


@dataclass
class Settings:
    mode: str = DEFAULT_MODE.value  # one of MODE_NAMES
    language: str = "auto"  # a language id, or "auto"
    last_voice: str | None = None  # folder name of a saved voice
    play_on_speakers: bool = False
    output_device: str | None = None  # None: the system's default output
    steps: int = 32
    guidance: float = 2.0
    denoise: bool = True
    preprocess: bool = True
    postprocess: bool = True
    check_mode: str = "off"  # off | check | retake | best_of_n (docs/checks.md)
    check_candidates: int = 3  # best of N
    check_retries: int = 2  # retake on failure: at most this many more takes
    check_max_wer: float = 0.2
    check_min_similarity: float = 0.75
    pad: float = 0.1  # seconds of silence before and after each generated piece
    fade: float = 0.1  # seconds of fade-in and fade-out
    normalize_text: bool = True  # speak numbers and dates (upstream's normalize_text; off there by default)
    history_max_entries: int = 200
    history_max_mb: int = 500
    api: bool = False  # serve the OpenAI-compatible API (docs/api.md)
    api_max_waiting: int = 16  # API requests that may wait for the GPU; more are answered 429

    def generation_config(self, seed: int | None) -> GenerationConfig:
        """What the engine is asked for with these settings alone (a client's own choices replace some)."""
        return GenerationConfig(num_step=self.steps, guidance_scale=self.guidance, denoise=self.denoise,
                                preprocess_prompt=self.preprocess, postprocess_output=self.postprocess, seed=seed,
                                pad_duration=self.pad, fade_duration=self.fade, normalize_text=self.speaks_numbers)

    @property
    def speaks_numbers(self) -> bool:
        """normalize_text as chosen, while the package that does it is installed (`voicedesk[tn]`)."""
        return self.normalize_text and normalize_available()

    @classmethod
    def load(cls, path: Path) -> Settings:
        """Settings from `path`; a missing file gives the defaults, a bad value its default (with a warning)."""
        return cls.check(path)[0]

    @classmethod
    def check(cls, path: Path) -> tuple[Settings, list[str]]:
        """Settings from `path` and one sentence per value that was replaced by its default: of the
        wrong type, out of its range (`RANGES`) or not one of its choices (`CHOICES`)."""
        if not path.exists():
            return cls(), []
        stored = read_json(path) or {}
        settings, problems = cls(), []
        for f in fields(cls):
            if f.name not in stored:
                continue
            value, default = stored[f.name], DEFAULTS[f.name]
            if _acceptable(f.name, value, default):
                setattr(settings, f.name, float(value) if isinstance(default, float) else value)
            else:
                problems.append(f"{f.name} = {value!r} is not valid ({_expected(f.name, default)}): "
                                f"using {default!r}")
        for problem in problems:
            log.warning("settings in %s: %s", path, problem)
        return settings, problems

    def save(self, path: Path) -> None:
        atomic_write_json(path, asdict(self))

    def updated(self, path: Path, **changes) -> Settings:
        """Apply `changes`, save, return self (unknown names raise TypeError). A value that `check` would replace
        (wrong type, out of range, not a choice) raises SettingError, and nothing is changed."""
        known = {f.name for f in fields(self)}
        if set(changes) - known:
            raise TypeError(f"unknown settings: {sorted(set(changes) - known)}")
        for name, value in changes.items():
            if not _acceptable(name, value, DEFAULTS[name]):
                raise SettingError(f"{name} = {value!r} is not valid: use {_expected(name, DEFAULTS[name])}.")
        for name, value in changes.items():
            setattr(self, name, value)
        self.save(path)
        return self


# Each setting's default (the class's own), read-only: a changed value must be of its kind
DEFAULTS = MappingProxyType({f.name: f.default for f in fields(Settings)})
# What a value may be beyond its type, the one home of these bounds: the widgets that show a setting
# (app/ui/advanced.py, app/ui/checks.py) and the API's fields (app/api/schemas.py) read them from here.
MAX_PICKED_SEED = 2**31 - 2  # the largest seed a person picks on the page or sends to the API (the engine takes more)
CHOICES = {"mode": MODE_NAMES, "check_mode": tuple(m.value for m in CheckMode)}
RANGES = {"steps": (4, 64), "guidance": (0.0, 4.0), "pad": (0.0, 1.0), "fade": (0.0, 0.5),
          "history_max_entries": (1, 100_000),
          "history_max_mb": (1, 1_000_000), "api_max_waiting": (1, 1_000), "check_candidates": (2, 8),
          "check_retries": (1, 5), "check_max_wer": (0.0, 1.0), "check_min_similarity": (0.0, 1.0)}


_KIND = {bool: "true or false", int: "a whole number", float: "a number", str: "text", type(None): "text or null"}


def _acceptable(name: str, value, default) -> bool:
    if not _same_kind(value, default):
        return False
    if name in CHOICES:
        return value in CHOICES[name]
    if name == "language":
        return value == "auto" or value in language_ids()
    if name in RANGES:
        low, high = RANGES[name]
        return low <= value <= high  # NaN is never in range
    return True


def _expected(name: str, default) -> str:
    if name in CHOICES:
        return "one of " + ", ".join(CHOICES[name])
    if name == "language":
        return "a language code or 'auto'"
    if name in RANGES:
        low, high = RANGES[name]
        return f"{_KIND[type(default)]} from {low} to {high}"
    return _KIND[type(default)]


def _same_kind(value, default) -> bool:
    if default is None:  # optional strings
        return value is None or isinstance(value, str)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, type(default))


def random_seed() -> int:
    """A seed the app picks for a person who gave none: any of 0..MAX_PICKED_SEED, so that it can be typed back into
    the page or sent to the API to hear the same take again."""
    return secrets.randbelow(MAX_PICKED_SEED + 1)
