"""Helper models are found locally or not at all; a download is planned (files, size) before it runs."""
import pytest

from engine.errors import VoiceDeskError
from engine.hub import HubModel, select_files


def test_a_download_takes_configs_and_one_weights_format():
    names = ["config.json", "preprocessor_config.json", "pytorch_model.bin", "model.safetensors",
             "tf_model.h5", "flax_model.msgpack", "onnx/model.onnx", "README.md", "vocab.json", "merges.txt",
             "training_args.bin"]
    assert select_files(names) == ["config.json", "merges.txt", "model.safetensors", "preprocessor_config.json",
                                   "vocab.json"]
    assert "pytorch_model.bin" in select_files(["config.json", "pytorch_model.bin", "training_args.bin"])
    assert "training_args.bin" not in select_files(["config.json", "pytorch_model.bin", "training_args.bin"])


def test_a_local_folder_is_used_as_is(tmp_path):
    assert HubModel(str(tmp_path), "test").local_folder() == str(tmp_path)


def test_offline_a_missing_model_is_absent_and_cannot_be_planned(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model = HubModel("nobody/no-such-model", "test")
    assert model.local_folder() is None
    with pytest.raises(VoiceDeskError, match="Cannot reach the model hub for nobody/no-such-model"):
        model.download_plan()


def test_download_progress_is_one_fraction_of_the_whole_download(monkeypatch):
    """The hub's byte bars each count the bytes of every file; with the plan's total they make one
    fraction over the whole download (not per file)."""
    import huggingface_hub

    from engine.hub import snapshot

    def snapshot_download(repo_id, tqdm_class=None, **kwargs):
        with tqdm_class(total=0, unit="B", disable=True) as bar:  # totals grow as files register
            for n in (100, 300, 600):
                bar.update(n)
        return "/somewhere"

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    seen = []
    assert snapshot("someone/model", lambda f, m: seen.append(f), total=2000) == "/somewhere"
    assert seen == [0.05, 0.2, 0.5]
