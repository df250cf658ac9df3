"""Saved voices for the library's tests and those of the API and Wyoming lookups: small voices, meta.json edited by
hand, folders damaged as a failing disk would, and Voice.load counted."""
import json
from pathlib import Path

import torch

from engine.voice import Voice


def make_voice(transcript="Hello there.", frames=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Voice(tokens=torch.randint(0, 1024, (8, frames), generator=g), transcript=transcript, rms=0.08)


def named_by_hand(entry, name):
    """Give a saved voice another display name in its meta.json, as a person editing the file (or copying a
    folder in) can: names that `save` refuses, such as one that differs from another only in case."""
    info = json.loads((entry.folder / "meta.json").read_text())
    (entry.folder / "meta.json").write_text(json.dumps({**info, "name": name}))


def torn(entry):
    tokens = entry.folder / "voice.safetensors"
    tokens.write_bytes(tokens.read_bytes()[:100])  # cut short, as by a failing disk


def counting_loads(monkeypatch) -> list[Path]:
    """The folders Voice.load reads from now on, in order."""
    loaded, load = [], Voice.load

    def counted(folder):
        loaded.append(Path(folder))
        return load(folder)

    monkeypatch.setattr(Voice, "load", counted)
    return loaded
