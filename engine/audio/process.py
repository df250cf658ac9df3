"""Audio in and out of the model: prepare a reference clip like upstream OmniVoice, finish generated
audio (silence, loudness, fades), and quick diagnostics of a clip for the UI.

Every waveform here is a float32 NumPy array (n,), mono. Operations, constants and their order
follow upstream omnivoice 0.2.1 (`create_voice_clone_prompt`, `_post_process_audio`,
`utils/audio.py`) so results match it sample for sample.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.audio import silence
from engine.audio.io import RECOMMENDED_SECONDS, SAMPLE_RATE, Clip
from engine.errors import AudioInputError

TARGET_RMS = 0.1  # upstream raises quiet references to this RMS and scales the output back

# ---------------------------------------------------------------------------------------------
# Reference preparation (upstream create_voice_clone_prompt, audio part)


@dataclass(frozen=True)
class Reference:
    samples: np.ndarray  # (n,) float32, 24 kHz, ready for the codec (not yet cut to whole frames)
    rms: float  # RMS of the clip as loaded: the output is scaled back to it when it is < 0.1


def prepare_reference(samples: np.ndarray, preprocess: bool = True, trim_long: bool = True) -> Reference:
    """Raise a quiet clip to RMS 0.1; then, if `preprocess`, cut clips > 20 s at a pause to <= 15 s
    (only with `trim_long`: upstream skips it when the user gave a transcript, which must match
    the audio) and shorten pauses (inner to 200 ms, 100 ms lead, 200 ms tail)."""
    rms = float(np.sqrt(np.mean(samples**2)))
    if 0 < rms < TARGET_RMS:
        samples = samples * TARGET_RMS / rms
    if preprocess:
        if trim_long:
            samples = silence.trim_long(samples, SAMPLE_RATE)
        samples = silence.remove_silence(samples, SAMPLE_RATE, mid_ms=200, lead_ms=100, trail_ms=200)
        if len(samples) == 0:
            raise AudioInputError("No speech was found in the clip: everything in it is quieter than "
                                  "-50 dBFS. Record closer to the microphone.")
    return Reference(samples, rms)


# ---------------------------------------------------------------------------------------------
# Output finishing (upstream _post_process_audio and cross_fade_chunks)


def finish_output(audio: np.ndarray, ref_rms: float | None, remove_pauses: bool = True,
                  pad_s: float = 0.1, fade_s: float = 0.1) -> np.ndarray:
    """Shorten pauses over 500 ms (and edges to 100 ms), restore the reference's loudness (or
    peak-normalise to 0.5 without a reference), then fade in/out and pad with silence."""
    if remove_pauses:
        audio = silence.remove_silence(audio, SAMPLE_RATE, mid_ms=500, lead_ms=100, trail_ms=100)
    if ref_rms is not None and ref_rms < TARGET_RMS:
        audio = audio * ref_rms / TARGET_RMS
    elif ref_rms is None and len(audio):
        peak = np.abs(audio).max()
        if peak > 1e-6:
            audio = audio / peak * 0.5
    return fade_and_pad(audio, pad_s, fade_s)


def fade_and_pad(audio: np.ndarray, pad_s: float = 0.1, fade_s: float = 0.1) -> np.ndarray:
    """Linear fade-in/out over fade_s (at most half the clip each) and pad_s of zeros on both sides."""
    if len(audio) == 0:
        return audio
    out = audio.copy()
    k = min(int(fade_s * SAMPLE_RATE), len(out) // 2)
    if k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    pad = np.zeros(int(pad_s * SAMPLE_RATE), dtype=out.dtype)
    return np.concatenate([pad, out, pad])


def cross_fade_chunks(chunks: list[np.ndarray], gap_s: float = 0.3) -> np.ndarray:
    """Join chunks: each seam fades out over gap_s/3, has gap_s/3 of silence, fades in over gap_s/3."""
    if len(chunks) == 1:
        return chunks[0]
    third = int(gap_s * SAMPLE_RATE) // 3
    merged = chunks[0].copy()
    for chunk in chunks[1:]:
        k = min(third, len(merged))
        if k > 0:
            merged[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
        head = chunk.copy()
        k = min(third, len(head))
        if k > 0:
            head[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        merged = np.concatenate([merged, np.zeros(third, np.float32), head])
    return merged


# ---------------------------------------------------------------------------------------------
# Diagnostics for the UI


@dataclass(frozen=True)
class ClipReport:
    seconds: float
    peak: float  # largest |sample|, 1.0 = full scale
    clipped_fraction: float  # share of samples at (or past) full scale
    silence_fraction: float  # share of 20 ms frames more than 40 dB below the loudest frame
    snr_db: float  # rough: loud frames (95th percentile) over the noise floor (5th: pauses)
    hints: list[str] = field(default_factory=list)


DC_OFFSET = 0.05  # a mean sample further from 0 than this (full scale 1) is a faulty input
TONAL_FLATNESS = 0.2  # spectral flatness of the quietest frames below this: a tone, not noise


def _floor_is_tonal(frames: np.ndarray, frame_rms: np.ndarray) -> bool:
    """Is the sound in the quietest tenth of the frames a steady tone (peaky spectrum) rather than noise
    (flat spectrum)? Noise between words is background noise; a tone there means the whole clip is one."""
    if len(frames) == 0:
        return False
    floor = frames[frame_rms <= np.percentile(frame_rms, 10)].astype(np.float64)
    power = np.mean(np.abs(np.fft.rfft(floor, axis=1)) ** 2, axis=0)[1:] + 1e-20  # DC bin left out
    return float(np.exp(np.mean(np.log(power))) / np.mean(power)) < TONAL_FLATNESS


def inspect_clip(clip: Clip) -> ClipReport:
    """Measure a loaded clip and say, in words, what would make it a better reference."""
    offset = float(np.mean(clip.samples))
    x = clip.samples - np.float32(offset)  # a DC offset is not sound: measure levels without it
    frame = SAMPLE_RATE // 50
    frames = x[: len(x) // frame * frame].reshape(-1, frame)
    frame_rms = np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)) if len(frames) else np.zeros(1)
    loudest = frame_rms.max()
    peak = float(np.abs(x).max())
    clipped = float(np.mean(np.abs(x) >= 0.99))
    quiet = float(np.mean(frame_rms < loudest * 10 ** (-40 / 20))) if loudest > 0 else 1.0
    noise, speech = np.percentile(frame_rms, 5), np.percentile(frame_rms, 95)
    snr = float(20 * np.log10(speech / noise)) if noise > 0 else 99.0

    hints = []
    low, high = RECOMMENDED_SECONDS
    if clip.truncated:
        hints.append(clip.cut_note)
    if clip.source_seconds < low:
        hints.append(f"Short clip ({clip.source_seconds:.1f} s): {low:.0f}-{high:.0f} s of speech clones "
                     f"the voice better.")
    elif clip.source_seconds > 20:
        hints.append("Long clip: without a transcript it is cut at a pause to at most 15 s; "
                     f"{low:.0f}-{high:.0f} s is recommended.")
    elif clip.source_seconds > high:
        hints.append(f"Clips over {high:.0f} s make generation slower; {low:.0f}-{high:.0f} s is "
                     f"recommended.")
    if clipped > 0.001:
        hints.append("The recording is clipped (distorted at full volume): lower the input gain and "
                     "record again.")
    if abs(offset) > DC_OFFSET:
        hints.append(f"The waveform is shifted off centre (a DC offset of {offset:+.2f} of full scale): a sign of a "
                     "faulty microphone or sound card input.")
    if peak < 0.05:
        hints.append(f"The recording is very quiet (its loudest moment is {20 * np.log10(max(peak, 1e-9)):.0f} "
                     "dBFS): move closer to the microphone.")
    if quiet > 0.5:
        hints.append("More than half of the clip is silence.")
    if snr < 15 and _floor_is_tonal(frames, frame_rms):
        hints.append("The clip is one steady sound (a tone or a hum) without the pauses of speech: record a "
                     "voice speaking.")
    elif snr < 15:
        hints.append("There is a lot of background noise: record in a quieter room.")
    if clip.source_rate < 16000:
        hints.append(f"Low sample rate ({clip.source_rate / 1000:g} kHz, telephone quality): the cloned "
                     f"voice will sound muffled.")
    return ClipReport(clip.seconds, peak, clipped, quiet, snr, hints)
