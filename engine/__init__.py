"""VoiceDesk engine: turns (voice, text) into audio. No UI imports here.

The public API is re-exported here (`from engine import Engine, GenerationConfig, Mode, Voice`); it is
loaded on first use so that `import engine.constants` stays light (no torch)."""
import importlib

_PUBLIC = {
    "Engine": "engine.engine", "LoadProgress": "engine.engine", "SynthesisResult": "engine.engine",
    "AudioChunk": "engine.engine",
    "GenerationConfig": "engine.config", "Mode": "engine.config",
    "Voice": "engine.voice", "VoiceDeskError": "engine.errors",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
