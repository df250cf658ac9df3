"""Helper models from the Hugging Face hub (the speech recogniser, the speaker encoder): used only
when already on this computer, downloaded only when the user asks, with the size said first and
byte progress while it arrives."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import VoiceDeskError

Progress = Callable[[float, str], None]
SMALL_SUFFIXES = (".json", ".txt", ".model", ".tiktoken")  # configs, tokenizers, preprocessors


@dataclass(frozen=True)
class HubModel:
    """A model by hub id, or by local folder (an environment variable may point at one)."""

    repo_id: str
    purpose: str  # what it is for, in the user's words

    def local_folder(self) -> str | None:
        """Its folder on this computer, or None (never touches the network). A download fetches only the
        files of `download_plan`, so the cached copy is judged by those: its config and weights (the hub
        client's own offline lookup calls a copy without the model card or other formats incomplete)."""
        if os.path.isdir(self.repo_id):
            return self.repo_id
        from huggingface_hub import try_to_load_from_cache

        try:
            config = try_to_load_from_cache(self.repo_id, "config.json")
        except ValueError:  # not a hub id either (a folder that does not exist)
            return None
        if not isinstance(config, str):  # never fetched (None), or known not to exist
            return None
        folder = os.path.dirname(config)
        weights = [name for name in select_files(os.listdir(folder)) if not name.endswith(SMALL_SUFFIXES)]
        return folder if weights else None

    def download_plan(self) -> tuple[list[str], int]:
        """The files a download fetches and their total size in bytes (asks the hub)."""
        from huggingface_hub import HfApi

        try:
            info = HfApi().model_info(self.repo_id, files_metadata=True)
        except Exception as err:  # offline, unknown id, HTTP error
            raise VoiceDeskError(f"Cannot reach the model hub for {self.repo_id} ({type(err).__name__}). "
                                 "Connect to the internet once to download it.") from None
        sizes = {s.rfilename: s.size or 0 for s in info.siblings}
        files = select_files(list(sizes))
        return files, sum(sizes[f] for f in files)

    def download(self, progress: Progress | None = None) -> str:
        """Fetch the files of `download_plan` into the hub cache; returns the folder."""
        files, total = self.download_plan()
        return snapshot(self.repo_id, progress, allow_patterns=files, total=total)


def select_files(names: list[str]) -> list[str]:
    """Configs and tokenizer files at the top level, and one weights format: safetensors if there
    are any, else PyTorch .bin (never TensorFlow, Flax or ONNX copies)."""
    top = [n for n in names if "/" not in n]
    weights = ([n for n in top if n.endswith(".safetensors")]
               or [n for n in top if n.startswith("pytorch_model") and n.endswith(".bin")])
    return sorted([n for n in top if n.endswith(SMALL_SUFFIXES)] + weights)


def snapshot(repo_id: str, progress: Progress | None, total: int | None = None, **kwargs) -> str:
    """snapshot_download reporting progress(fraction, message) as bytes arrive. Every byte bar of
    the hub counts for itself (its bars may be disabled, which stops their own count); `total`,
    the size of the whole download, turns that count into one fraction."""
    from huggingface_hub import snapshot_download
    from tqdm.auto import tqdm

    class ReportingBar(tqdm):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.counts_bytes, self.received = kw.get("unit") == "B", kw.get("initial", 0)

        def update(self, n=1):
            self.received += n or 0
            whole = total or self.total
            if progress is not None and self.counts_bytes and whole:
                progress(min(1.0, self.received / whole), f"Downloading {repo_id}")
            return super().update(n)

    return snapshot_download(repo_id, tqdm_class=ReportingBar, **kwargs)
