"""Errors the engine raises on purpose: each carries a message meant for the person using the app."""


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


class Cancelled(VoiceDeskError):
    """The request was stopped by the user."""
