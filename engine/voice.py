"""The Voice: what a reference clip becomes once (codec tokens, transcript, loudness), and its safe
file format (safetensors + JSON, never pickle)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .errors import AudioInputError
from .fileio import atomic_write, atomic_write_text

FORMAT = "voicedesk-voice"
VERSION = 1
TOKENS_FILE = "voice.safetensors"
META_FILE = "voice.json"


@dataclass
class Voice:
    tokens: torch.Tensor  # [8, T_ref] int64 codec tokens of the reference clip
    transcript: str
    rms: float | None  # loudness of the reference; None for a voice made from generated audio
    notes: tuple[str, ...] = ()  # what the user should know about how it was made (not saved)

    @property
    def seconds(self) -> float:
        return self.tokens.shape[-1] / 25.0

    def save(self, folder: str | Path) -> None:
        """Write `voice.safetensors` and `voice.json` into `folder`, each atomically."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"format": FORMAT, "version": VERSION, "transcript": self.transcript,
                "rms": None if self.rms is None else float(self.rms)}
        tokens = self.tokens.detach().to("cpu", torch.int64).contiguous()
        atomic_write(folder / TOKENS_FILE, lambda tmp: save_file({"tokens": tokens}, tmp))
        atomic_write_text(folder / META_FILE, json.dumps(meta, ensure_ascii=False, indent=1))

    @classmethod
    def of_generated(cls, tokens: torch.Tensor, text: str) -> Voice:
        """A generated piece as the voice of what follows it (an automatic voice carried on, as upstream does
        for long text): its tokens and its text; no loudness to match."""
        return cls(tokens=tokens.cpu(), transcript=text, rms=None)

    @classmethod
    def load(cls, folder: str | Path) -> Voice:
        folder = Path(folder)
        meta = _read_meta(folder)
        try:
            tokens = load_file(str(folder / TOKENS_FILE))["tokens"]
        except (OSError, ValueError, KeyError, SafetensorError) as e:
            raise _unreadable(folder, e) from e
        return cls._checked(tokens, meta.get("transcript", ""), meta["rms"], folder)

    @staticmethod
    def saved_transcript(folder: str | Path) -> str:
        """The transcript of the voice saved in `folder`, from its voice.json, its tokens not read; AudioInputError,
        as from `load`, where that file or the tokens file's header show that `load` would refuse the voice:
        voice.json not a VoiceDesk voice's or its loudness no number of 0 or more, the tokens file missing, cut
        short (its header says how long it is) or not safetensors, or the tensor it describes not of [8, T] integer
        codes. Codes out of 0..1023 (which only a file that `save` did not write holds) are told only by `load`."""
        folder = Path(folder)
        meta = _read_meta(folder)
        _check_saved_layout(folder)
        return str(meta.get("transcript", ""))

    @classmethod
    def from_upstream_prompt(cls, path: str | Path) -> Voice:
        """Import an upstream OmniVoice `VoiceClonePrompt.save()` file (.pt) without unpickling code."""
        try:
            data = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many types for a bad or unsafe file
            raise AudioInputError(f"{path} is not a readable OmniVoice voice prompt ({e}).") from e
        if not isinstance(data, dict) or data.get("format_version") != 1:
            raise AudioInputError(f"{path} is not an OmniVoice voice prompt (format_version 1).")
        try:
            rms = _loudness(data.get("ref_rms", 0.0))
        except ValueError:
            raise AudioInputError(f"{path}: the voice's loudness (rms) is {NOT_A_LOUDNESS}.") from None
        return cls._checked(data.get("ref_audio_tokens"), data.get("ref_text", ""), rms, path)

    @classmethod
    def _checked(cls, tokens, transcript, rms: float | None, source) -> Voice:
        if not isinstance(tokens, torch.Tensor):
            raise _not_a_token_tensor(source)
        _check_shape(tokens.shape, source)
        _check_integer(tokens.dtype, source)
        # as int64 first: PyTorch has no min/max for uint16/32/64 (a uint64 past 2**63 turns negative, so refused)
        codes = tokens.to(torch.int64)
        if codes.min() < 0 or codes.max() > 1023:
            raise _not_codes(source)
        return cls(tokens=codes, transcript=str(transcript), rms=rms)


class VoiceMetaError(AudioInputError):
    """A voice's voice.json that cannot be read or is not a VoiceDesk voice's of this version. `problem` says what is
    wrong with it without naming the file, for a caller that names it in its user's terms (an import: the file the
    person imported, not the folder it was unpacked into)."""

    def __init__(self, meta_file: Path, problem: str):
        super().__init__(f"{meta_file} {problem}.")
        self.problem = problem


def _read_meta(folder: Path) -> dict:
    """The voice.json of the voice saved in `folder`, its loudness ("rms") as a number or None; VoiceMetaError, saying
    what is wrong, when it cannot be read, is not a VoiceDesk voice's of this version or gives a loudness that is no
    number of 0 or more."""
    meta_file = folder / META_FILE
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except OSError as err:
        raise VoiceMetaError(meta_file, f"cannot be read ({err.strerror or err})") from err
    except UnicodeDecodeError as err:
        raise VoiceMetaError(meta_file, "is not text (UTF-8)") from err
    except json.JSONDecodeError as err:
        where = f"{err.msg} at line {err.lineno}, column {err.colno}"
        raise VoiceMetaError(meta_file, f"is not valid JSON ({where})") from err
    except (ValueError, RecursionError) as err:  # nested too deep, an integer of thousands of digits
        raise VoiceMetaError(meta_file, f"cannot be read ({err})") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise VoiceMetaError(meta_file, f'does not describe a VoiceDesk voice (no "format": "{FORMAT}")')
    if meta.get("version") != VERSION:
        said = f"version {meta['version']!r}" if "version" in meta else "no version"
        raise VoiceMetaError(meta_file, f"has {said}; this VoiceDesk reads voices of version {VERSION}")
    try:
        return {**meta, "rms": _loudness(meta.get("rms"))}
    except ValueError:
        raise VoiceMetaError(meta_file, f'gives a loudness ("rms") that is {NOT_A_LOUDNESS}') from None


def _check_saved_layout(folder: Path) -> None:
    """The checks of `_checked` that need no codes, for the tokens saved in `folder`, from the tokens file's header:
    safetensors checks that the file holds all the data the header describes (a file cut short is refused), but
    the data is not read."""
    try:
        with safe_open(str(folder / TOKENS_FILE), framework="pt") as saved:
            tokens = saved.get_slice("tokens")
            _check_shape(tokens.get_shape(), folder)
            _check_integer(tokens[:0].dtype, folder)  # no rows: no data read
    except (OSError, ValueError, KeyError, SafetensorError) as e:
        raise _unreadable(folder, e) from e


def _check_shape(shape, source) -> None:
    if len(shape) != 2 or shape[0] != 8 or shape[1] == 0:
        raise _not_a_token_tensor(source)


def _check_integer(dtype: torch.dtype, source) -> None:
    if dtype.is_floating_point or dtype.is_complex:
        raise _not_codes(source)


def _not_a_token_tensor(source) -> AudioInputError:
    return AudioInputError(f"{source}: voice tokens must be a non-empty [8, T] tensor.")


def _not_codes(source) -> AudioInputError:
    return AudioInputError(f"{source}: voice tokens must be integer codes in 0..1023.")


NOT_A_LOUDNESS = "not a number of 0 or more"  # what `_loudness` refuses, as a voice file's errors say it


def _loudness(rms) -> float | None:
    """The loudness a voice file gives (`rms`, a clip's RMS) as a number, None where it gives none; ValueError when it
    is no number of 0 or more: text that is no number, a list, an integer past float's range, NaN, infinite, or
    negative (which `finish_output` would turn into the output's sign flipped, or NaN for minus infinity)."""
    try:
        loudness = None if rms is None else float(rms)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(NOT_A_LOUDNESS) from None
    if loudness is not None and not 0 <= loudness < math.inf:  # NaN too: every comparison with it is false
        raise ValueError(NOT_A_LOUDNESS)
    return loudness


def _unreadable(folder: Path, error: Exception) -> AudioInputError:
    return AudioInputError(f"The saved voice in {folder} cannot be read ({error}).")
