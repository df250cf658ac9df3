"""How many audio frames to generate for a text: upstream OmniVoice's character-weight rule.

Every character gets a weight (roughly: speaking time relative to one Latin letter). The target
length is the text's weight divided by the reference's speaking rate (weight per audio frame),
with short estimates stretched up, because very short utterances are spoken slower.
"""
from __future__ import annotations

import bisect
import operator
import unicodedata
from functools import cache, reduce

from engine.constants import FRAME_RATE

# Without a reference clip, the rate of "Nice to meet you." said in one second.
FALLBACK_REF_TEXT = "Nice to meet you."
FALLBACK_REF_FRAMES = 25

# Estimates below this many frames are compressed towards it by a cube root.
SHORT_FRAMES = 50
SHORT_EXPONENT = 1.0 / 3

SCRIPT_WEIGHTS = {
    "latin": 1.0,  # also Cyrillic, Greek, Armenian, Georgian: one letter, one sound
    "cjk": 3.0,  # one character is a whole syllable
    "ethiopic": 3.0,
    "yi": 3.0,
    "hangul": 2.5,
    "kana": 2.2,
    "indic": 1.8,
    "khmer_myanmar": 1.8,
    "thai_lao": 1.5,
    "arabic": 1.5,  # consonant scripts: vowels are unwritten but spoken
    "hebrew": 1.5,
    "default": 1.0,
}
DIGIT_WEIGHT = 3.5  # a digit is read as a whole number word
PUNCTUATION_WEIGHT = 0.5  # punctuation and symbols (emoji included): a short pause
SPACE_WEIGHT = 0.2
MARK_WEIGHT = 0.0  # combining marks and the Arabic tatweel are not spoken on their own
ARABIC_TATWEEL = "\u0640"

# (last code point, script) of consecutive Unicode block runs below U+FFF0, in code point order.
# Code points are looked up only after the category checks in `char_weight`, so the punctuation
# inside these blocks never reaches this table.
_BLOCKS = (
    (0x02AF, "latin"),  # Basic Latin .. IPA Extensions
    (0x03FF, "latin"),  # Greek and Coptic
    (0x052F, "latin"),  # Cyrillic and its supplement
    (0x058F, "latin"),  # Armenian
    (0x05FF, "hebrew"),
    (0x08FF, "arabic"),  # Arabic, Syriac, Thaana, NKo, Samaritan, Mandaic, Arabic extensions
    (0x0DFF, "indic"),  # Devanagari .. Sinhala
    (0x0EFF, "thai_lao"),
    (0x0FFF, "indic"),  # Tibetan
    (0x109F, "khmer_myanmar"),  # Myanmar
    (0x10FF, "latin"),  # Georgian
    (0x11FF, "hangul"),  # Hangul Jamo
    (0x139F, "ethiopic"),  # Ethiopic and its supplement
    (0x177F, "default"),  # Cherokee, Canadian syllabics, Ogham, Runic, Philippine scripts
    (0x17FF, "khmer_myanmar"),  # Khmer
    (0x18FF, "default"),  # Mongolian, Canadian syllabics extended
    (0x19DF, "indic"),  # Limbu, Tai Le, New Tai Lue
    (0x19FF, "khmer_myanmar"),  # Khmer symbols
    (0x1C7F, "indic"),  # Buginese .. Ol Chiki
    (0x1C8F, "latin"),  # Cyrillic Extended-C
    (0x1CBF, "latin"),  # Georgian Extended
    (0x1CFF, "indic"),  # Sundanese supplement, Vedic extensions
    (0x1DBF, "latin"),  # phonetic extensions
    (0x1DFF, "default"),  # combining diacritics supplement
    (0x1EFF, "latin"),  # Latin Extended Additional (Vietnamese)
    (0x30FF, "kana"),  # Greek Extended .. Katakana: everything up to the end of Katakana
    (0x312F, "cjk"),  # Bopomofo
    (0x318F, "hangul"),  # Hangul compatibility jamo
    (0x9FFF, "cjk"),  # Kanbun .. CJK Unified Ideographs
    (0xA4CF, "yi"),
    (0xA63F, "default"),  # Lisu, Vai
    (0xA69F, "latin"),  # Cyrillic Extended-B
    (0xA6FF, "default"),  # Bamum
    (0xA7FF, "latin"),  # Latin Extended-D
    (0xA82F, "indic"),  # Syloti Nagri
    (0xA87F, "default"),  # Phags-pa
    (0xA95F, "indic"),  # Saurashtra .. Rejang
    (0xA97F, "hangul"),  # Hangul Jamo Extended-A
    (0xA9DF, "indic"),  # Javanese
    (0xA9FF, "khmer_myanmar"),  # Myanmar Extended-B
    (0xAA5F, "indic"),  # Cham
    (0xAA7F, "khmer_myanmar"),  # Myanmar Extended-A
    (0xAAFF, "indic"),  # Tai Viet, Meetei Mayek extensions
    (0xAB2F, "ethiopic"),  # Ethiopic Extended-A
    (0xAB6F, "latin"),  # Latin Extended-E
    (0xABBF, "default"),  # Cherokee supplement
    (0xABFF, "indic"),  # Meetei Mayek
    (0xD7AF, "hangul"),  # Hangul syllables
    (0xFAFF, "cjk"),  # Hangul Jamo Extended-B, surrogates, private use, CJK compatibility
    (0xFDFF, "arabic"),  # Arabic Presentation Forms-A
    (0xFE6F, "default"),  # variation selectors .. small form variants
    (0xFEFF, "arabic"),  # Arabic Presentation Forms-B
    (0xFFEF, "latin"),  # half- and full-width forms
)
_BLOCK_ENDS = tuple(end for end, _ in _BLOCKS)
_SUPPLEMENTARY_IDEOGRAPHS = 0x20000  # above it (Ext B and later planes) count as CJK


@cache
def char_weight(ch: str) -> float:
    """Speaking weight of one character (1.0 = one Latin letter)."""
    if ch.isascii() and ch.isalpha():
        return SCRIPT_WEIGHTS["latin"]
    if ch == " ":
        return SPACE_WEIGHT
    if ch == ARABIC_TATWEEL:
        return MARK_WEIGHT
    major = unicodedata.category(ch)[0]
    if major == "M":
        return MARK_WEIGHT
    if major in "PS":
        return PUNCTUATION_WEIGHT
    if major == "Z":
        return SPACE_WEIGHT
    if major == "N":
        return DIGIT_WEIGHT
    code = ord(ch)
    block = bisect.bisect_left(_BLOCK_ENDS, code)
    if block < len(_BLOCKS):
        return SCRIPT_WEIGHTS[_BLOCKS[block][1]]
    if code > _SUPPLEMENTARY_IDEOGRAPHS:
        return SCRIPT_WEIGHTS["cjk"]
    return SCRIPT_WEIGHTS["default"]


def text_weight(text: str) -> float:
    """Sum of `char_weight` over the text, added left to right (the order matters for rounding; from
    Python 3.12 on, `sum` of floats compensates its rounding, so it no longer gives upstream's values)."""
    return reduce(operator.add, map(char_weight, text), 0.0)


def weight_per_second() -> float:
    """A typical speaking rate in weight units: that of the fallback reference (about 14)."""
    return text_weight(FALLBACK_REF_TEXT) * FRAME_RATE / FALLBACK_REF_FRAMES


def estimate_frames(text: str, ref_text: str, ref_frames: int) -> float:
    """Frames for `text` when `ref_text` took `ref_frames` (0.0 for an unusable reference),
    before the speed factor and rounding (upstream `RuleDurationEstimator.estimate_duration`)."""
    if ref_frames <= 0 or not ref_text:
        return 0.0
    ref_weight = text_weight(ref_text)
    if ref_weight == 0:
        return 0.0
    weight_per_frame = ref_weight / ref_frames
    frames = text_weight(text) / weight_per_frame
    if frames < SHORT_FRAMES:
        return SHORT_FRAMES * (frames / SHORT_FRAMES) ** SHORT_EXPONENT
    return frames


def estimate_target_tokens(
    text: str,
    ref_text: str | None = None,
    ref_tokens: int | None = None,
    speed: float | None = None,
) -> int:
    """Number of audio frames (25 per second) to generate for `text`.

    Parameters
    ----------
    text : str
        The text to speak.
    ref_text : str, optional
        Transcript of the reference clip; with `ref_tokens` it sets the speaking rate.
    ref_tokens : int, optional
        Length of the reference clip in audio frames.
    speed : float, optional
        Speaking-rate factor; values above 1 give fewer frames. None, 1 or a value <= 0 mean 1.

    Returns
    -------
    int
        At least 1; identical to upstream OmniVoice's `_estimate_target_tokens`.
    """
    if ref_tokens is None or not ref_text:
        ref_text, ref_tokens = FALLBACK_REF_TEXT, FALLBACK_REF_FRAMES
    frames = estimate_frames(text, ref_text, ref_tokens)
    if speed is not None and speed > 0 and speed != 1.0:
        frames = frames / speed
    return max(1, int(frames))


def tokens_for_duration(seconds: float) -> int:
    """Frames for a fixed output duration (the `duration=` setting)."""
    return max(1, int(seconds * FRAME_RATE))


def plan_target_tokens(
    text: str,
    ref_text: str | None = None,
    ref_tokens: int | None = None,
    speed: float | None = None,
    duration: float | None = None,
) -> tuple[int, float]:
    """Frames for the whole text and the speed to estimate its chunks with, as upstream does.

    Parameters
    ----------
    text, ref_text, ref_tokens, speed
        As for `estimate_target_tokens`.
    duration : float, optional
        Fixed output length in seconds; it overrides `speed`.

    Returns
    -------
    (int, float)
        The target frame count, and the speed factor for chunk estimates: with `duration` it is
        the natural length over the forced one, so long-text chunks shrink or grow alike.
    """
    if duration is None:
        return estimate_target_tokens(text, ref_text, ref_tokens, speed), 1.0 if speed is None else speed
    natural = estimate_target_tokens(text, ref_text, ref_tokens)
    forced = tokens_for_duration(duration)
    return forced, natural / forced
