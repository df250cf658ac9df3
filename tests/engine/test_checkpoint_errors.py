"""A broken or missing checkpoint gives a CheckpointError that names the file or tensor, never a traceback."""
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.constants import DEMO_MODEL
from engine.errors import CheckpointError
from engine.lm.checkpoint import ENV_VAR, load_lm, resolve_checkpoint

FIXES = ("--model", ENV_VAR, "internet")


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    shutil.copytree(DEMO_MODEL, folder)
    return folder


def _rewrite_weights(folder: Path, edit) -> None:
    tensors = load_file(str(folder / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(folder / "model.safetensors"))


def test_missing_folder_says_how_to_fix(tmp_path):
    with pytest.raises(CheckpointError) as err:
        resolve_checkpoint(tmp_path / "nowhere")
    assert "nowhere" in str(err.value) and all(fix in str(err.value) for fix in FIXES)


def test_env_var_is_used(monkeypatch, ckpt):
    monkeypatch.setenv(ENV_VAR, str(ckpt))
    assert resolve_checkpoint() == ckpt


def test_offline_hub_id_not_cached(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError) as err:
        resolve_checkpoint("voicedesk-tests/no-such-model")
    message = str(err.value)
    assert "voicedesk-tests/no-such-model" in message and all(fix in message for fix in FIXES)


@pytest.mark.parametrize("part", ["tokenizer.json", "audio_tokenizer", "model.safetensors", "config.json"])
def test_incomplete_folder_names_the_missing_part(ckpt, part):
    path = ckpt / part
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    with pytest.raises(CheckpointError) as err:
        resolve_checkpoint(ckpt)
    assert part in str(err.value)


def test_config_without_llm_config(ckpt):
    config = json.loads((ckpt / "config.json").read_text())
    del config["llm_config"]
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="llm_config"):
        resolve_checkpoint(ckpt)


def test_truncated_weights(ckpt):
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated") as err:
        load_lm(ckpt)
    assert str(weights) in str(err.value)


def test_garbage_weights(ckpt):
    (ckpt / "model.safetensors").write_bytes(b"\x00\x01not a safetensors file" * 100)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_lm(ckpt)


def test_missing_tensor_is_named(ckpt):
    _rewrite_weights(ckpt, lambda t: t.pop("llm.layers.1.self_attn.k_proj.weight"))
    with pytest.raises(CheckpointError, match=r"llm\.layers\.1\.self_attn\.k_proj\.weight"):
        load_lm(ckpt)


def test_wrong_shape_is_named(ckpt):
    def shrink(tensors):
        tensors["llm.layers.0.mlp.up_proj.weight"] = tensors["llm.layers.0.mlp.up_proj.weight"][:-1].clone()

    _rewrite_weights(ckpt, shrink)
    with pytest.raises(CheckpointError, match=r"llm\.layers\.0\.mlp\.up_proj\.weight") as err:
        load_lm(ckpt)
    assert "model.safetensors" in str(err.value)


def test_valid_checkpoint_loads_every_parameter():
    lm = load_lm(resolve_checkpoint(DEMO_MODEL))
    assert not any(p.is_meta for p in lm.parameters())
    raw = load_file(str(DEMO_MODEL / "model.safetensors"))
    layer = lm.layers[1]
    q, k, v = (raw[f"llm.layers.1.self_attn.{n}_proj.weight"] for n in "qkv")
    assert torch.equal(layer.attn.qkv_proj.weight, torch.cat([q, k, v]))
    gate, up = raw["llm.layers.1.mlp.gate_proj.weight"], raw["llm.layers.1.mlp.up_proj.weight"]
    assert torch.equal(layer.mlp.gate_up_proj.weight, torch.cat([gate, up]))


def _fake_hub(monkeypatch, download):
    """snapshot_download that finds nothing cached and then runs `download(tqdm_class)`."""
    import huggingface_hub

    def snapshot_download(repo_id, local_files_only=False, tqdm_class=None, **kwargs):
        if local_files_only:
            raise huggingface_hub.errors.LocalEntryNotFoundError("not cached")
        return download(tqdm_class)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


def test_download_reports_progress(monkeypatch):
    def download(tqdm_class):
        with tqdm_class(total=1000, unit="B", disable=True) as bar:
            bar.update(250)
            bar.update(750)
        return str(DEMO_MODEL)

    _fake_hub(monkeypatch, download)
    seen = []
    assert resolve_checkpoint("someone/some-model", lambda f, m: seen.append((f, m))) == DEMO_MODEL
    assert [f for f, _ in seen] == [0.25, 1.0] and "someone/some-model" in seen[0][1]


def test_failed_download_says_how_to_fix(monkeypatch):
    def download(tqdm_class):
        raise ConnectionError("no route to host")

    _fake_hub(monkeypatch, download)
    with pytest.raises(CheckpointError) as err:
        resolve_checkpoint("someone/some-model")
    assert "no route to host" in str(err.value) and all(fix in str(err.value) for fix in FIXES)
