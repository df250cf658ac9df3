"""Errors the engine raises on purpose: each carries a message meant for the person using the app."""
from __future__ import annotations


class VoiceDeskError(Exception):
    """Base class: the message is shown to the user as is."""


class AudioInputError(VoiceDeskError):
    """A reference clip that cannot be used (unreadable, empty, silent, too short, a URL ...)."""


class TextInputError(VoiceDeskError):
    """Text, language or instruct that cannot be used."""


class SettingError(VoiceDeskError):
    """A generation setting outside its range or of the wrong type (the message names it and the range)."""


class StorageError(VoiceDeskError):
    """A file that cannot be saved: the disk is full, the folder is read-only, ..."""


class CheckpointError(VoiceDeskError):
    """A model folder that is missing, incomplete, corrupt or of another model."""


class TranscriptRequiredError(VoiceDeskError):
    """A reference clip came without a transcript and no speech recogniser is available."""


class GpuMemoryError(VoiceDeskError):
    """The GPU ran out of memory: what PyTorch asked for and what was free, and what the person can do."""

    @classmethod
    def from_torch(cls, err: BaseException, doing: str) -> GpuMemoryError:
        """From PyTorch's OutOfMemoryError raised while `doing` (e.g. "loading the model"); its allocator notes
        (what this process holds, PYTORCH_CUDA_ALLOC_CONF) stay in the log."""
        asked = str(err).split(" Including", 1)[0].strip().rstrip(".")  # "CUDA out of memory. Tried to allocate ..."
        return cls(f"The GPU ran out of memory {doing} ({asked}). Programs that use the GPU (games, browsers, other "
                   "AI apps) take memory from VoiceDesk: close them and try again.")


class Cancelled(VoiceDeskError):
    """The request was stopped by the user."""
