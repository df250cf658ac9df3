"""The fixed, representative workload set every speed and fidelity figure is measured on.

Reference clips of about 3, 6 and 10 s; outputs of about 3, 10 and 25 s; English, Vietnamese and
Chinese; plus the baseline request, the one upstream was first measured on (BENCHMARKS.md): 6 s reference,
11.4 s asked -> 11.6 s out.
Output lengths are fixed with `duration` so that every mode (and upstream) runs the same shapes.
The reference clips are synthetic voiced signals (harmonics with vibrato and pauses): with random
weights the content does not matter, and with real weights they still exercise the same shapes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.constants import SAMPLE_RATE

REF_TEXTS = {
    3: "Profiling turns guesses into evidence.",
    6: "Profiling is not a final debugging step, it is a tool for deciding.",
    10: "Measure representative workloads, find where the time goes, change the smallest thing, and measure again.",
}

TEXTS = {
    "en": {
        3: "Hello there, nice to meet you.",
        10: "Across ten English and Vietnamese voice cloning samples, mean inference time decreased "
            "substantially, and one second of audio required about fifty six milliseconds.",
        25: "The story behind this product is simple. Profiling the reference implementation showed tens of "
            "thousands of kernel launches for every generation, and a graphics processor that sat idle most "
            "of the time. Moving less data and launching less work made it several times faster, and every "
            "figure was measured, written down, and checked again under the same conditions.",
    },
    "vi": {10: "Xin chào, hôm nay trời đẹp quá. Chúng tôi đang thử nghiệm giọng nói mới, và kết quả "
               "nghe rất tự nhiên, rõ ràng và dễ chịu."},
    "zh": {10: "大家好，今天天气很好。我们正在测试新的语音合成系统，结果听起来非常自然，清晰而且流畅。"},
}
LANGUAGES = {"en": "English", "vi": "Vietnamese", "zh": "Chinese"}


@dataclass(frozen=True)
class Workload:
    name: str
    language: str  # code of TEXTS / LANGUAGES
    ref_seconds: int
    duration: float  # asked output length in seconds (upstream pads ~0.2 s in post-processing)
    text_seconds: int  # which text of TEXTS to speak

    @property
    def text(self) -> str:
        return TEXTS[self.language][self.text_seconds]

    @property
    def ref_text(self) -> str:
        return REF_TEXTS[self.ref_seconds]

    def reference(self) -> np.ndarray:
        return synthetic_voice(self.ref_seconds, seed=self.ref_seconds)


WORKLOADS = (
    Workload("baseline", "en", 6, 11.4, 10),
    Workload("en-ref3-out3", "en", 3, 3.0, 3),
    Workload("en-ref6-out10", "en", 6, 10.0, 10),
    Workload("en-ref10-out25", "en", 10, 25.0, 25),
    Workload("vi-ref6-out10", "vi", 6, 10.0, 10),
    Workload("zh-ref6-out10", "zh", 6, 10.0, 10),
    Workload("zh-ref3-out3", "zh", 3, 3.0, 10),
)


def select(names: str) -> list[Workload]:
    if names in ("", "all"):
        return list(WORKLOADS)
    by_name = {w.name: w for w in WORKLOADS}
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown workloads {unknown}; choose from {sorted(by_name)}")
    return [by_name[n] for n in names.split(",")]


def synthetic_voice(seconds: float, seed: int = 0, sr: int = SAMPLE_RATE) -> np.ndarray:
    """A deterministic voiced-like signal: a 120 Hz harmonic series with vibrato, syllable-rate
    amplitude modulation, 0.3 s pauses every 2 s, and light noise. float32 mono at `sr`."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 120 + 15 * np.sin(2 * np.pi * 0.7 * t) + 4 * np.sin(2 * np.pi * 5.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    voice = sum((0.5 / k) * np.sin(k * phase) for k in range(1, 9))
    syllables = 0.55 + 0.45 * np.sin(2 * np.pi * 4.0 * t) ** 2
    pauses = ((t % 2.0) < 1.7).astype(np.float64)
    signal = 0.25 * voice * syllables * pauses + 0.003 * rng.standard_normal(len(t))
    return signal.astype(np.float32)


# Long-form prose for the batching tables: English at about 150 words a minute of speech, made of
# varied sentences (each streamed piece its own length), repeated in a fixed order to the word count.
_PROSE = (
    "The morning train was late again, and the platform filled with people who had stopped pretending "
    "to be surprised.", "She read the letter twice before she understood what it was asking of her.",
    "Nobody in the village remembered who had planted the old oak by the bridge.",
    "It rained for three days, and on the fourth the river reached the garden wall.",
    "He kept a notebook of every bird he saw, with the date, the weather and the time of day.",
    "When the lights came back on, the room was exactly as they had left it, except for the open window.",
    "There are two ways to cross the valley, and neither of them is quick.",
    "The baker opened at six, and by seven the bread on the left side of the shelf was always gone.",
    "They argued about the map for an hour and then followed the river anyway.",
    "A good question, she said, is worth more than a quick answer.",
)
WORDS_PER_MINUTE = 150


def prose(minutes: float) -> str:
    """About `minutes` of English speech: sentences of _PROSE in order, a paragraph every five."""
    words, sentences = int(minutes * WORDS_PER_MINUTE), []
    while sum(len(s.split()) for s in sentences) < words:
        sentences.append(_PROSE[len(sentences) % len(_PROSE)])
    paragraphs = [" ".join(sentences[i:i + 5]) for i in range(0, len(sentences), 5)]
    return "\n\n".join(paragraphs)
