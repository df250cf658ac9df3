"""The committed tiny checkpoint and the upstream goldens are complete and shaped as documented.

Every tensor of the tiny checkpoint is checked against shapes derived from its config.json (the
released layout, scaled down), the text tokenizer against the vocabulary size and the 7 control
tokens, and every file and tensor in the goldens README inventory against the files.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import soundfile as sf
from safetensors import safe_open
from tokenizers import Tokenizer

from engine.constants import DEMO_MODEL

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDENS = DATA / "goldens"
SPECIALS = ["<|denoise|>", "<|lang_start|>", "<|lang_end|>", "<|instruct_start|>",
            "<|instruct_end|>", "<|text_start|>", "<|text_end|>"]
SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                      "I32": "int32", "BOOL": "bool", "U8": "uint8"}


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    with safe_open(str(path), framework="pt") as f:
        return {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}


def assert_same_shapes(actual: dict, expected: dict) -> None:
    missing, extra = sorted(expected.keys() - actual.keys()), sorted(actual.keys() - expected.keys())
    assert not missing and not extra, f"missing {missing[:8]}, unexpected {extra[:8]}"
    wrong = {k: (actual[k], expected[k]) for k in expected if actual[k] != expected[k]}
    assert not wrong, f"shape (file, expected): {wrong}"


def lm_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    llm = cfg["llm_config"]
    h, inter, hd = llm["hidden_size"], llm["intermediate_size"], llm["head_dim"]
    q, kv = llm["num_attention_heads"] * hd, llm["num_key_value_heads"] * hd
    audio_rows = cfg["num_audio_codebook"] * cfg["audio_vocab_size"]
    shapes = {
        "llm.embed_tokens.weight": (llm["vocab_size"], h),
        "llm.norm.weight": (h,),
        "audio_embeddings.weight": (audio_rows, h),
        "audio_heads.weight": (audio_rows, h),
        "codebook_layer_offsets": (cfg["num_audio_codebook"],),
    }
    for i in range(llm["num_hidden_layers"]):
        p = f"llm.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            p + "mlp.gate_proj.weight": (inter, h), p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
        })
    return shapes


def conv(shapes: dict, name: str, out_ch: int, in_ch: int, k: int, bias: bool = True) -> None:
    shapes[name + ".weight"] = (out_ch, in_ch, k)
    if bias:
        shapes[name + ".bias"] = (out_ch,)


def linear(shapes: dict, name: str, out_features: int, in_features: int) -> None:
    shapes[name + ".weight"] = (out_features, in_features)
    shapes[name + ".bias"] = (out_features,)


def dac_shapes(ac: dict) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}

    def res_units(prefix: str, dim: int) -> None:
        for u in (1, 2, 3):
            shapes[f"{prefix}.res_unit{u}.snake1.alpha"] = (1, dim, 1)
            conv(shapes, f"{prefix}.res_unit{u}.conv1", dim, dim, 7)
            shapes[f"{prefix}.res_unit{u}.snake2.alpha"] = (1, dim, 1)
            conv(shapes, f"{prefix}.res_unit{u}.conv2", dim, dim, 1)

    d = ac["encoder_hidden_size"]
    conv(shapes, "acoustic_encoder.conv1", d, 1, 7)
    for i, stride in enumerate(ac["downsampling_ratios"]):
        p = f"acoustic_encoder.block.{i}"
        res_units(p, d)
        shapes[p + ".snake1.alpha"] = (1, d, 1)
        conv(shapes, p + ".conv1", 2 * d, d, 2 * stride)
        d *= 2
    shapes["acoustic_encoder.snake1.alpha"] = (1, d, 1)
    conv(shapes, "acoustic_encoder.conv2", ac["hidden_size"], d, 3)

    d = ac["decoder_hidden_size"]
    conv(shapes, "acoustic_decoder.conv1", d, ac["hidden_size"], 7)
    for i, stride in enumerate(ac["upsampling_ratios"]):
        p = f"acoustic_decoder.block.{i}"
        shapes[p + ".snake1.alpha"] = (1, d, 1)
        shapes[p + ".conv_t1.weight"] = (d, d // 2, 2 * stride)  # ConvTranspose1d: (in, out, k)
        shapes[p + ".conv_t1.bias"] = (d // 2,)
        d //= 2
        res_units(p, d)
    shapes["acoustic_decoder.snake1.alpha"] = (1, d, 1)
    conv(shapes, "acoustic_decoder.conv2", 1, d, 7)
    return shapes


def hubert_shapes(sc: dict) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    hs, dims = sc["hidden_size"], sc["conv_dim"]
    for i, (dim, k) in enumerate(zip(dims, sc["conv_kernel"])):
        conv(shapes, f"semantic_model.feature_extractor.conv_layers.{i}.conv", dim,
             dims[i - 1] if i else 1, k, bias=sc["conv_bias"])
    assert sc["feat_extract_norm"] == "group"  # a GroupNorm on the first conv only
    shapes["semantic_model.feature_extractor.conv_layers.0.layer_norm.weight"] = (dims[0],)
    shapes["semantic_model.feature_extractor.conv_layers.0.layer_norm.bias"] = (dims[0],)
    shapes["semantic_model.feature_projection.layer_norm.weight"] = (dims[-1],)
    shapes["semantic_model.feature_projection.layer_norm.bias"] = (dims[-1],)
    linear(shapes, "semantic_model.feature_projection.projection", hs, dims[-1])
    k, groups = sc["num_conv_pos_embeddings"], sc["num_conv_pos_embedding_groups"]
    pos = "semantic_model.encoder.pos_conv_embed.conv"
    shapes[pos + ".parametrizations.weight.original0"] = (1, 1, k)  # weight norm g (dim=2)
    shapes[pos + ".parametrizations.weight.original1"] = (hs, hs // groups, k)  # weight norm v
    shapes[pos + ".bias"] = (hs,)
    shapes["semantic_model.encoder.layer_norm.weight"] = (hs,)
    shapes["semantic_model.encoder.layer_norm.bias"] = (hs,)
    for i in range(sc["num_hidden_layers"]):
        p = f"semantic_model.encoder.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            linear(shapes, p + f"attention.{proj}", hs, hs)
        for norm in ("layer_norm", "final_layer_norm"):
            shapes[p + norm + ".weight"] = (hs,)
            shapes[p + norm + ".bias"] = (hs,)
        linear(shapes, p + "feed_forward.intermediate_dense", sc["intermediate_size"], hs)
        linear(shapes, p + "feed_forward.output_dense", hs, sc["intermediate_size"])
    return shapes


def semantic_coder_shapes(cfg: dict, hs: int) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    assert set(cfg["strides"]) == {1} and set(cfg["channel_ratios"]) == {1}  # released values
    k, uk = cfg["kernel_size"], cfg["unit_kernel_size"]
    conv(shapes, "encoder_semantic.conv", hs, hs, k, bias=False)
    conv(shapes, "decoder_semantic.conv1", hs, hs, k, bias=False)
    conv(shapes, "decoder_semantic.conv2", hs, hs, k, bias=False)
    for side in ("encoder_semantic", "decoder_semantic"):
        for j in range(len(cfg["strides"])):
            p = f"{side}.conv_blocks.{j}"
            conv(shapes, p + ".conv", hs, hs, 3)  # stride 1 blocks use kernel 3 with a bias
            for u in range(len(cfg["block_dilations"])):
                conv(shapes, f"{p}.res_units.{u}.conv1", hs, hs, uk, bias=False)
                conv(shapes, f"{p}.res_units.{u}.conv2", hs, hs, 1, bias=False)
    return shapes


def codec_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    ac, sc = cfg["acoustic_model_config"], cfg["semantic_model_config"]
    hop = math.prod(ac["downsampling_ratios"])
    frame_rate = math.ceil(cfg["sample_rate"] / hop)
    bits = math.ceil(math.log2(cfg["codebook_size"]))
    n_q = int(1000 * cfg["target_bandwidths"][-1] // (frame_rate * bits))
    hidden, dim = ac["hidden_size"] + sc["hidden_size"], cfg["codebook_dim"]
    shapes = {**dac_shapes(ac), **hubert_shapes(sc), **semantic_coder_shapes(cfg, sc["hidden_size"])}
    linear(shapes, "fc", hidden, hidden)
    linear(shapes, "fc1", sc["hidden_size"], hidden)
    linear(shapes, "fc2", ac["hidden_size"], hidden)
    for q in range(n_q):
        p = f"quantizer.quantizers.{q}."
        shapes.update({
            p + "codebook.embed": (cfg["codebook_size"], dim),
            p + "codebook.embed_avg": (cfg["codebook_size"], dim),
            p + "codebook.cluster_size": (cfg["codebook_size"],),
            p + "codebook.inited": (1,),
        })
        linear(shapes, p + "project_in", dim, hidden)
        linear(shapes, p + "project_out", hidden, dim)
    return shapes


def test_checkpoint_files_exist():
    for rel in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors",
                "audio_tokenizer/preprocessor_config.json"):
        assert (DEMO_MODEL / rel).is_file(), rel


def test_lm_tensors_match_config():
    cfg = read_json(DEMO_MODEL / "config.json")
    assert cfg["model_type"] == "omnivoice" and cfg["llm_config"]["model_type"] == "qwen3"
    assert_same_shapes(tensor_shapes(DEMO_MODEL / "model.safetensors"), lm_shapes(cfg))


def test_codec_tensors_match_config():
    cfg = read_json(DEMO_MODEL / "audio_tokenizer" / "config.json")
    assert cfg["model_type"] == "higgs_audio_v2_tokenizer"
    assert math.prod(cfg["acoustic_model_config"]["downsampling_ratios"]) == 960  # 25 Hz at 24 kHz
    assert_same_shapes(tensor_shapes(DEMO_MODEL / "audio_tokenizer" / "model.safetensors"), codec_shapes(cfg))
    pre = read_json(DEMO_MODEL / "audio_tokenizer" / "preprocessor_config.json")
    assert (pre["sampling_rate"], pre["hop_length"]) == (cfg["sample_rate"], 960)


def test_tokenizer_vocab_and_control_tokens():
    cfg = read_json(DEMO_MODEL / "config.json")
    tok = Tokenizer.from_file(str(DEMO_MODEL / "tokenizer.json"))
    assert tok.get_vocab_size(with_added_tokens=True) == cfg["llm_config"]["vocab_size"]
    # upstream embeds audio ids (and the mask id) through the text table too
    assert cfg["llm_config"]["vocab_size"] > cfg["audio_mask_id"]
    specials = {t["content"]: t for t in read_json(DEMO_MODEL / "tokenizer.json")["added_tokens"]}
    for token in SPECIALS:
        assert specials[token]["special"], token
        ids = tok.encode(f"a{token}b", add_special_tokens=False).ids
        assert tok.token_to_id(token) in ids and tok.encode(token, add_special_tokens=False).ids == [
            tok.token_to_id(token)], token


def inventory() -> list[tuple[str, str, str, tuple[int, ...]]]:
    text = (GOLDENS / "README.md").read_text(encoding="utf-8")
    section = text.split("## Inventory (generated)", 1)[1]
    rows = re.findall(r"^\| (\S+) \| (\S+) \| (\w+) \| \[([\d, ]*)\] \|$", section, flags=re.M)
    assert rows, "goldens README has no inventory rows"
    return [(f, k, d, tuple(int(x) for x in s.split(",") if x.strip())) for f, k, d, s in rows]


@pytest.mark.parametrize("rel", sorted({row[0] for row in inventory()}))
def test_golden_file_matches_readme(rel):
    path = GOLDENS / rel
    assert path.is_file(), rel
    rows = [row for row in inventory() if row[0] == rel]
    kind = rows[0][2]
    if rel.endswith(".safetensors"):
        documented = {key: (dtype, shape) for _, key, dtype, shape in rows}
        with safe_open(str(path), framework="pt") as f:
            actual = {key: (SAFETENSORS_DTYPES[f.get_slice(key).get_dtype()],
                            tuple(f.get_slice(key).get_shape())) for key in f.keys()}
        assert actual == documented
    elif kind == "json":
        read_json(path)
    else:
        assert kind == "wav"
        info = sf.info(str(path))
        assert (info.frames, info.channels) == (rows[0][3] + (1,))[:2], rel
