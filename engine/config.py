"""Configuration dataclasses: the model as read from a checkpoint, generation knobs with upstream's
defaults, and the quality mode."""
from __future__ import annotations

import enum
from dataclasses import dataclass, fields

from engine.constants import CODEBOOK_SIZE, DEMO_FLAG, NUM_CODEBOOKS
from engine.errors import SettingError

MAX_STEPS = 128  # the graph runner's schedule buffer holds this many steps; more adds nothing audible


@dataclass(frozen=True)
class ModelConfig:
    """Shapes of the OmniVoice LM, read from the checkpoint's config.json (`llm_config` nested)."""

    hidden_size: int = 1024
    intermediate_size: int = 3072
    num_layers: int = 28
    num_heads: int = 16
    num_kv_heads: int = 8
    head_dim: int = 128
    vocab_size: int = 151676
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    audio_vocab_size: int = CODEBOOK_SIZE + 1
    audio_mask_id: int = CODEBOOK_SIZE
    num_codebooks: int = NUM_CODEBOOKS
    demo: bool = False  # the tiny random demo checkpoint: its output is noise

    @classmethod
    def from_json(cls, cfg: dict) -> ModelConfig:
        llm = cfg["llm_config"]
        rope = llm.get("rope_parameters") or llm.get("rope_scaling") or {}
        theta = llm.get("rope_theta", rope.get("rope_theta", cls.rope_theta))
        return cls(
            hidden_size=llm["hidden_size"],
            intermediate_size=llm["intermediate_size"],
            num_layers=llm["num_hidden_layers"],
            num_heads=llm["num_attention_heads"],
            num_kv_heads=llm["num_key_value_heads"],
            head_dim=llm.get("head_dim", llm["hidden_size"] // llm["num_attention_heads"]),
            vocab_size=llm["vocab_size"],
            rms_norm_eps=llm.get("rms_norm_eps", cls.rms_norm_eps),
            rope_theta=float(theta),
            audio_vocab_size=cfg.get("audio_vocab_size", cls.audio_vocab_size),
            audio_mask_id=cfg.get("audio_mask_id", cls.audio_mask_id),
            num_codebooks=cfg.get("num_audio_codebook", cls.num_codebooks),
            demo=bool(cfg.get(DEMO_FLAG, False)),
        )


MAX_SEED = 2**63 - 1  # the largest seed (a signed 64-bit integer)


def offset_seed(seed: int, offset: int) -> int:
    """The seed `offset` places after `seed` (take j of a line, piece i of a stream): seed + offset, from 0 again past
    MAX_SEED, so that every seed in range has its takes and pieces."""
    return (seed + offset) % (MAX_SEED + 1)


# The accepted range of each setting a person chooses: (label, low, high, whole number). The bounds
# keep every request finite: a speed or a fixed duration sets how much audio one piece holds, and
# memory grows with its square; 0.25-4 is also the OpenAI speech API's speed range.
SETTING_RANGES = {
    "num_step": ("steps", 1, MAX_STEPS, True),
    "guidance_scale": ("guidance", 0.0, 10.0, False),
    "t_shift": ("t_shift", 0.0, 10.0, False),
    "layer_penalty_factor": ("layer_penalty_factor", 0.0, 100.0, False),
    "position_temperature": ("position_temperature", 0.0, 100.0, False),
    "class_temperature": ("class_temperature", 0.0, 100.0, False),
    "audio_chunk_duration": ("audio_chunk_duration", 0.0, 600.0, False),  # 0 turns chunking off
    "audio_chunk_threshold": ("audio_chunk_threshold", 0.0, 600.0, False),
    "pad_duration": ("pad", 0.0, 10.0, False),  # seconds of silence before and after
    "fade_duration": ("fade", 0.0, 10.0, False),
    "speed": ("speed", 0.25, 4.0, False),
    "duration": ("duration", 0.0, 600.0, False),  # seconds; a streamed piece gets its share, however small
    "seed": ("seed", 0, MAX_SEED, True),
}
ABOVE_LOW = {"duration", "t_shift"}
OPTIONAL_SETTINGS = {"speed", "duration", "seed"}  # None: natural pace, automatic length, random seed
SWITCHES = {"denoise", "preprocess_prompt", "postprocess_output", "normalize_text"}  # True or False


@dataclass
class GenerationConfig:
    """Every knob of upstream's `generate()`, with upstream's defaults (omnivoice 0.2.1); `normalize_text`
    is upstream's `generate(normalize_text=...)` argument (off there too). Checked on construction."""

    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0
    denoise: bool = True
    preprocess_prompt: bool = True
    postprocess_output: bool = True
    audio_chunk_duration: float = 15.0
    audio_chunk_threshold: float = 30.0
    pad_duration: float = 0.1
    fade_duration: float = 0.1
    normalize_text: bool = False
    speed: float | None = None
    duration: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> GenerationConfig:
        """Return self, or raise SettingError naming the first setting outside `SETTING_RANGES`
        (NaN and infinity included) or a switch that is not True/False: a bad value never reaches the model."""
        for name in SWITCHES:
            if not isinstance(getattr(self, name), bool):
                raise SettingError(f"{name} must be true or false, not {getattr(self, name)!r}.")
        for name, (label, low, high, whole) in SETTING_RANGES.items():
            value = getattr(self, name)
            if value is None and name in OPTIONAL_SETTINGS:
                continue
            kind = (int,) if whole else (int, float)
            above_low = name in ABOVE_LOW  # the bound itself is excluded
            if (isinstance(value, bool) or not isinstance(value, kind)
                    or not (low < value if above_low else low <= value) or not value <= high):
                what = "a whole number" if whole else "a number"
                span = f"above {low:g} and at most {high:g}" if above_low else f"from {low:g} to {high:g}"
                raise SettingError(f"{label} must be {what} {span}, not {value!r}.")
        return self

    def replace(self, **changes) -> GenerationConfig:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise TypeError(f"unknown generation settings: {sorted(unknown)}")
        return GenerationConfig(**{**{f.name: getattr(self, f.name) for f in fields(self)}, **changes})


class Mode(str, enum.Enum):
    """Quality mode, the one home of the modes' names and labels: the settings, the command lines (the launcher's
    and the tools') and the UI read them here (this module imports no torch, so `--help` stays quick). EAGER is the
    plain reference path (what tests and fidelity figures compare to)."""

    EAGER = "eager"
    HIFI = "hifi"
    REALTIME = "realtime"

    @property
    def label(self) -> str:
        """Its name for people: the quality switch, the metrics line."""
        return _MODE_LABELS[self]


_MODE_LABELS = {Mode.EAGER: "Reference (eager)", Mode.HIFI: "High fidelity", Mode.REALTIME: "Realtime"}
MODE_NAMES = tuple(mode.value for mode in Mode)  # what a mode setting or a --mode option may be
DEFAULT_MODE = Mode.HIFI
