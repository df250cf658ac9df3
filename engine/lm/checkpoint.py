"""Find, download and validate an OmniVoice checkpoint folder; load its LM weights and text tokenizer.

A checkpoint folder holds `config.json` (with `llm_config`), `model.safetensors` (or a sharded
`model.safetensors.index.json`), the text tokenizer files and `audio_tokenizer/` (the codec).
Every failure becomes a `CheckpointError` that says which file or tensor is wrong and how to fix it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from engine.config import ModelConfig
from engine.constants import HUB_ID
from engine.errors import CheckpointError
from engine.hub import Progress, snapshot
from engine.lm.model import OmniVoiceLM

ENV_VAR = "VOICEDESK_MODEL"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
CODEC_DIR = "audio_tokenizer"

# Released name (after `llm.layers.N.`) -> (our name after `layers.N.`, parts fused into it, in order).
_LAYER_TENSORS = {
    "attn.qkv_proj.weight": ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"),
    "attn.o_proj.weight": ("self_attn.o_proj.weight",),
    "attn.q_norm.weight": ("self_attn.q_norm.weight",),
    "attn.k_norm.weight": ("self_attn.k_norm.weight",),
    "mlp.gate_up_proj.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
    "mlp.down_proj.weight": ("mlp.down_proj.weight",),
    "input_norm.weight": ("input_layernorm.weight",),
    "post_attn_norm.weight": ("post_attention_layernorm.weight",),
}
_TOP_TENSORS = {
    "embed_tokens.weight": ("llm.embed_tokens.weight",),
    "norm.weight": ("llm.norm.weight",),
    "audio_embeddings.weight": ("audio_embeddings.weight",),
    "audio_heads.weight": ("audio_heads.weight",),
}

def _how_to_fix(repo_id: str = HUB_ID) -> str:
    return (f"Three ways forward: connect to the internet once, so that {repo_id} is downloaded into the Hugging "
            f"Face cache; or pass --model DIR (or set {ENV_VAR}=DIR) with a downloaded OmniVoice folder; or start "
            f"with --demo to try everything on a tiny built-in model (its voices are noise).")


def resolve_checkpoint(model: str | os.PathLike | None = None, progress: Progress | None = None) -> Path:
    """Return a validated checkpoint folder.

    `model` is a folder or a Hugging Face hub id; None means env VOICEDESK_MODEL, else `k2-fsa/OmniVoice`.
    A hub id is taken from the local cache if present, otherwise downloaded, reporting
    `progress(fraction, message)` as bytes arrive.
    """
    source = str(model) if model is not None else os.environ.get(ENV_VAR) or HUB_ID
    path = Path(source).expanduser()
    if path.is_dir():
        return validate_checkpoint(path)
    if path.is_absolute() or source.startswith(".") or source.count("/") != 1:
        raise CheckpointError(f"The model folder {source} does not exist. {_how_to_fix()}")
    return _download(source, progress)


def _download(repo_id: str, progress: Progress | None) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return validate_checkpoint(Path(snapshot_download(repo_id, local_files_only=True)))
    except Exception:  # not cached, or cached in part: the download below completes it
        pass
    try:
        folder = Path(snapshot(repo_id, progress))
    except Exception as err:  # offline, DNS, HTTP, disk full: all mean "not available"
        raise CheckpointError(
            f"The model {repo_id} is not on this computer and could not be downloaded "
            f"({type(err).__name__}: {err}). Missing: the whole checkpoint (config.json, "
            f"{WEIGHTS_FILE}, tokenizer files, {CODEC_DIR}/). {_how_to_fix(repo_id)}") from None
    return validate_checkpoint(folder)


def validate_checkpoint(folder: Path) -> Path:
    """Check that `folder` has every part of an OmniVoice checkpoint; return it unchanged."""
    folder = Path(folder)
    missing = []
    if not (folder / "config.json").is_file():
        missing.append("config.json")
    if not (folder / WEIGHTS_FILE).is_file() and not (folder / WEIGHTS_INDEX).is_file():
        missing.append(f"{WEIGHTS_FILE} (model weights)")
    missing += [name for name in TOKENIZER_FILES if not (folder / name).is_file()]
    if not (folder / CODEC_DIR / "config.json").is_file():
        missing.append(f"{CODEC_DIR}/ (the audio codec)")
    if missing:
        raise CheckpointError(f"The model folder {folder} is incomplete: missing {', '.join(missing)}. "
                              f"{_how_to_fix()}")
    read_model_config(folder)
    return folder


def read_model_config(folder: Path) -> ModelConfig:
    """Parse `config.json` into a ModelConfig."""
    path = Path(folder) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return ModelConfig.from_json(raw)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path} cannot be read: {err}") from None
    except (KeyError, TypeError) as err:
        raise CheckpointError(f"{path} is not an OmniVoice config (no usable llm_config: missing {err}).") from None


def _weight_files(folder: Path) -> list[Path]:
    index = folder / WEIGHTS_INDEX
    if not index.is_file():
        return [folder / WEIGHTS_FILE]
    try:
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    except (OSError, ValueError, KeyError, AttributeError) as err:
        raise CheckpointError(f"{index} cannot be read: {err}") from None
    return [folder / name for name in shards]


def _read_released_tensors(files: list[Path]) -> dict[str, tuple[Path, object]]:
    """Released tensor name -> (file, open safetensors handle) for every tensor in `files`."""
    where = {}
    for path in files:
        try:
            handle = safe_open(str(path), framework="pt", device="cpu")
            names = list(handle.keys())
        except (OSError, SafetensorError, ValueError) as err:
            raise CheckpointError(f"The weights file {path} is corrupt or truncated ({err}). "
                                  f"Download it again.") from None
        where.update((name, (path, handle)) for name in names)
    return where


def _load_tensor(name: str, where: dict, dtype: torch.dtype) -> torch.Tensor:
    if name not in where:
        files = sorted({str(p) for p, _ in where.values()}) or ["(no weights file)"]
        raise CheckpointError(f"The tensor {name} is missing from {', '.join(files)}: this is not a "
                              f"complete OmniVoice checkpoint.")
    path, handle = where[name]
    try:
        return handle.get_tensor(name).to(dtype)
    except (OSError, SafetensorError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"The tensor {name} in {path} cannot be read ({err}): the file is "
                              f"corrupt or truncated. Download it again.") from None


def released_names(cfg: ModelConfig) -> dict[str, tuple[str, ...]]:
    """Our parameter name -> the released tensor names concatenated (dim 0) to make it."""
    names = dict(_TOP_TENSORS)
    for i in range(cfg.num_layers):
        for ours, theirs in _LAYER_TENSORS.items():
            names[f"layers.{i}.{ours}"] = tuple(f"llm.layers.{i}.{t}" for t in theirs)
    return names


def load_lm(folder: Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> OmniVoiceLM:
    """Build the LM on the meta device and fill it from the checkpoint's safetensors (q/k/v, gate/up fused)."""
    folder = Path(folder)
    cfg = read_model_config(folder)
    with torch.device("meta"):
        lm = OmniVoiceLM(cfg)
    expected = {name: p.shape for name, p in lm.state_dict().items()}
    where = _read_released_tensors(_weight_files(folder))
    state = {}
    for ours, parts in released_names(cfg).items():
        tensors = [_load_tensor(name, where, dtype) for name in parts]
        fused = tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim=0)
        if fused.shape != expected[ours]:
            shapes = ", ".join(f"{n} {tuple(t.shape)}" for n, t in zip(parts, tensors))
            raise CheckpointError(f"{where[parts[0]][0]}: {shapes} do not match config.json "
                                  f"(expected {tuple(expected[ours])} for {ours}). The weights and the "
                                  f"config belong to different models.")
        state[ours] = fused.to(device)
    lm.load_state_dict(state, assign=True)
    return lm.eval().requires_grad_(False)


def load_text_tokenizer(folder: Path):
    """The checkpoint's text tokenizer (a transformers fast tokenizer; needs no torchaudio)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # it warns that config.json is not a text model's config
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except Exception as err:  # transformers raises many types for a broken tokenizer folder
        raise CheckpointError(f"The text tokenizer in {folder} cannot be loaded ({err}).") from None
    finally:
        hf_logging.set_verbosity(verbosity)
