"""Write a random-weight OmniVoice checkpoint in the layout of the released `k2-fsa/OmniVoice`.

The folder is written by upstream's own `save_pretrained` (OmniVoice, the text tokenizer, the
HiggsAudioV2 codec and its DAC feature extractor), so tensor names and config keys are the ones
the release was saved with:

    config.json  model.safetensors  tokenizer.json  tokenizer_config.json
    audio_tokenizer/{config.json, model.safetensors, preprocessor_config.json}

Usage (needs torch, torchaudio, transformers>=5.3 and the omnivoice 0.2.1 wheel, which can be
installed with `pip install --no-deps`; pydub/soundfile are not needed):

    python -m tools.make_checkpoint                # tiny -> engine/data/demo_model (committed)
    python -m tools.make_checkpoint --full OUTDIR  # released sizes, random weights (GPU benchmarks)
    python -m tools.make_checkpoint --codec-only OUTDIR  # its codec alone (codec benchmarks; no omnivoice)

Both are seeded and deterministic on CPU. Weights are float32. Instead of transformers' default
init (std 0.02 everywhere, zero codebooks, unit norms) every tensor is drawn so that activations
stay O(1) (linear weights std 1/sqrt(fan_in), embeddings std 1, so audio logits have std ~1):
predictions are then confident enough for clear top-1 margins but never saturate at
log-prob 0, where fp32 rounding would tie the confidence ranking. Norm weights, biases and Snake
alphas differ from their identity values, so a port that forgets one of them fails.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils import parametrize

from engine.constants import DEMO_FLAG, DEMO_MODEL

SEED = 20260601
TINY_DIR = DEMO_MODEL

OMNIVOICE_SPECIALS = ["<|denoise|>", "<|lang_start|>", "<|lang_end|>", "<|instruct_start|>",
                      "<|instruct_end|>", "<|text_start|>", "<|text_end|>"]
# Qwen3's first three control tokens, kept so pad/eos ids exist as in the release.
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Stand-in tokenizer training text (written for this file): the scripts the goldens exercise.
CORPUS = [
    "The quick brown fox jumps over the lazy dog, and then it takes a long nap in the sun.",
    "Please call me back at 555-0134 before 6:30 pm; the meeting moved to room 12B.",
    "She said: \"It's not the voice, it's what the voice carries.\" [laughter] Really?",
    "Numbers like 3.14159, 2,048 and 1/3 are read differently in every language.",
    "Profiling turns assumptions into evidence, and evidence changes direction.",
    "Dr. Smith and Mrs. Jones met at 10 a.m. on Jan. 5th, e.g. before the storm.",
    "Xin chào, hôm nay trời đẹp quá. Chúng tôi đang thử nghiệm giọng nói tổng hợp.",
    "Tiếng Việt có sáu thanh điệu: ngang, huyền, sắc, hỏi, ngã, nặng.",
    "Người ta nói rằng học một ngôn ngữ mới giống như mở ra một cánh cửa mới.",
    "今天天气很好，我们一起去公园散步吧。你觉得怎么样？",
    "语音合成技术正在快速发展，让机器说话越来越自然。",
    "这是一个测试句子，包含数字123和标点符号！",
    "こんにちは、世界。今日はとても良い天気ですね。",
    "カタカナとひらがなと漢字が混ざった文章です。",
    "안녕하세요, 만나서 반갑습니다. 오늘 날씨가 좋네요.",
    "Bonjour à tous, je m'appelle Élodie et j'habite à Montréal.",
    "Der schnelle braune Fuchs springt über den faulen Hund. Schön!",
    "Привет, как дела? Сегодня очень хорошая погода.",
    "¿Dónde está la biblioteca? ¡Está cerca de la estación!",
    "Emoji and symbols: 🙂 🎉 → ± € £ ¥ © ™ … — «quotes» ‘single’ “double”.",
    "Mixed 中文 and English, plus tiếng Việt, in one line: OK 好的 được.",
]
# Tokens learned from CORPUS (the trainer's target; it may stop earlier when merges run out).
BPE_TRAIN_VOCAB = 1200


@dataclass(frozen=True)
class Sizes:
    """Every size that differs between the tiny and the released checkpoint."""

    vocab_size: int  # text vocab incl. the 10 specials; trained BPE plus filler entries
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    dac_encoder_hidden: int
    dac_decoder_hidden: int
    dac_latent: int
    hubert_hidden: int
    hubert_layers: int
    hubert_heads: int
    hubert_intermediate: int
    hubert_conv_dim: int
    codebook_dim: int


# Upstream embeds every position as text too (audio ids up to the mask id 1024 included) and
# keeps the audio embedding there, so the text table needs more than 1024 rows.
# Like the release, heads * head_dim (64) is twice the hidden size (32) and kv heads are half.
TINY = Sizes(vocab_size=1280, hidden=32, intermediate=96, layers=2, heads=4, kv_heads=2,
             head_dim=16, dac_encoder_hidden=2, dac_decoder_hidden=64, dac_latent=32,
             hubert_hidden=32, hubert_layers=2, hubert_heads=2, hubert_intermediate=64,
             hubert_conv_dim=16, codebook_dim=8)
FULL = Sizes(vocab_size=151676, hidden=1024, intermediate=3072, layers=28, heads=16, kv_heads=8,
             head_dim=128, dac_encoder_hidden=64, dac_decoder_hidden=1024, dac_latent=256,
             hubert_hidden=768, hubert_layers=12, hubert_heads=12, hubert_intermediate=3072,
             hubert_conv_dim=512, codebook_dim=64)


def import_omnivoice():
    """Import upstream's model module; its audio helpers import pydub/soundfile at module level,
    which this script never calls, so empty stand-ins are used where they are not installed."""
    for package, modules in (("pydub", ("pydub", "pydub.silence")), ("soundfile", ("soundfile",))):
        try:
            importlib.import_module(package)
        except ImportError:
            for name in modules:
                stub = types.ModuleType(name)
                stub.AudioSegment = stub.detect_leading_silence = None
                stub.detect_nonsilent = stub.split_on_silence = None
                sys.modules[name] = stub
    from omnivoice import OmniVoice, OmniVoiceConfig

    return OmniVoice, OmniVoiceConfig


def build_text_tokenizer(vocab_size: int):
    """Byte-level BPE with Qwen2's exact normalizer and pre-tokenizer, trained on CORPUS; the 3
    Qwen and 7 OmniVoice control tokens take the last 10 ids, as in the release."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    n_specials = len(QWEN_SPECIALS) + len(OMNIVOICE_SPECIALS)
    trainer = trainers.BpeTrainer(vocab_size=min(BPE_TRAIN_VOCAB, vocab_size - n_specials),
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS, trainer)
    vocab = bpe.get_vocab()
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
              for m in json.loads(bpe.to_str())["model"]["merges"]]
    # Unreachable filler entries up to the wanted size, so the specials take the last 10 ids
    # (151666..151675 at the released size, where <|denoise|> is 151669 as released).
    for i in range(len(vocab), vocab_size - n_specials):
        vocab[f"<|filler_{i}|>"] = i
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)  # adds <|endoftext|> as unk/eos/pad
    tok.add_tokens([AddedToken(t, special=True, normalized=False)
                    for t in QWEN_SPECIALS[1:] + OMNIVOICE_SPECIALS], special_tokens=True)
    return tok


def build_codec_config(s: Sizes):
    from transformers import HiggsAudioV2TokenizerConfig

    return HiggsAudioV2TokenizerConfig(
        target_bandwidths=[0.5, 1, 1.5, 2],  # 8 quantizers at 25 Hz, as released
        codebook_size=1024,
        codebook_dim=s.codebook_dim,
        acoustic_model_config={
            "encoder_hidden_size": s.dac_encoder_hidden,
            "decoder_hidden_size": s.dac_decoder_hidden,
            "hidden_size": s.dac_latent,
            "downsampling_ratios": [8, 5, 4, 2, 3],  # hop 960 at 24 kHz
            "upsampling_ratios": [8, 5, 4, 2, 3],
        },
        semantic_model_config={
            "hidden_size": s.hubert_hidden,
            "num_hidden_layers": s.hubert_layers,
            "num_attention_heads": s.hubert_heads,
            "intermediate_size": s.hubert_intermediate,
            "conv_dim": [s.hubert_conv_dim] * 7,  # HuBERT's strides 5,2,2,2,2,2,2: 16 kHz -> 50 Hz
            "mask_time_prob": 0.0,  # no masked_spec_embed tensor, as released
        },
    )


def _normal(shape, std, gen):
    return torch.randn(shape, generator=gen) * std


def randomize_(model: nn.Module, gen: torch.Generator) -> None:
    """Draw every parameter and buffer so activations stay O(1) at any width (see module doc)."""
    for module in model.modules():
        weight_normed = parametrize.is_parametrized(module, "weight")
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.ConvTranspose1d)):
            if isinstance(module, nn.Linear):
                fan_in = module.in_features
            elif isinstance(module, nn.ConvTranspose1d):
                fan_in = module.in_channels * module.kernel_size[0] / module.stride[0]
            else:
                fan_in = module.in_channels // module.groups * module.kernel_size[0]
            if weight_normed:
                wn = module.parametrizations.weight
                v = _normal(wn.original1.shape, fan_in**-0.5, gen)
                dims = [d for d in range(v.dim()) if wn.original0.shape[d] == 1]
                norm = v.norm(dim=dims, keepdim=True)
                with torch.no_grad():
                    wn.original1.copy_(v)
                    wn.original0.copy_(norm * (1 + 0.1 * _normal(norm.shape, 1.0, gen)))
            else:
                with torch.no_grad():
                    module.weight.copy_(_normal(module.weight.shape, fan_in**-0.5, gen))
            if module.bias is not None:
                with torch.no_grad():
                    module.bias.copy_(_normal(module.bias.shape, 0.1, gen))
        elif isinstance(module, nn.Embedding):
            with torch.no_grad():
                module.weight.copy_(_normal(module.weight.shape, 1.0, gen))
        elif isinstance(module, (nn.LayerNorm, nn.GroupNorm)) or "RMSNorm" in type(module).__name__:
            with torch.no_grad():
                module.weight.copy_(1 + 0.1 * _normal(module.weight.shape, 1.0, gen))
                if getattr(module, "bias", None) is not None:
                    module.bias.copy_(_normal(module.bias.shape, 0.1, gen))
        elif type(module).__name__ == "Snake1d":
            with torch.no_grad():
                module.alpha.copy_(0.5 + torch.rand(module.alpha.shape, generator=gen))
        elif type(module).__name__ == "HiggsAudioV2TokenizerEuclideanCodebook":
            embed = _normal(module.embed.shape, 1.0, gen)
            with torch.no_grad():
                module.embed.copy_(embed)
                module.embed_avg.copy_(embed)  # EMA state as after training: consistent with embed
                module.cluster_size.fill_(1.0)
                module.inited.fill_(1.0)


def build_models(s: Sizes):
    from transformers import (
        DacFeatureExtractor,
        HiggsAudioV2TokenizerModel,
        Qwen3Config,
    )

    OmniVoice, OmniVoiceConfig = import_omnivoice()
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)

    text_tokenizer = build_text_tokenizer(s.vocab_size)
    vocab_size = len(text_tokenizer)
    llm_config = Qwen3Config(
        vocab_size=vocab_size, hidden_size=s.hidden, intermediate_size=s.intermediate,
        num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
        head_dim=s.head_dim, max_position_embeddings=40960, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True, pad_token_id=text_tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=text_tokenizer.convert_tokens_to_ids("<|im_end|>"), bos_token_id=None,
    )
    config = OmniVoiceConfig(llm_config=llm_config,
                             pad_token_id=llm_config.pad_token_id,
                             eos_token_id=llm_config.eos_token_id)
    model = OmniVoice(config).eval()
    randomize_(model, gen)

    codec = HiggsAudioV2TokenizerModel(build_codec_config(s)).eval()
    randomize_(codec, gen)
    calibrate_decoder_(codec, gen)
    feature_extractor = DacFeatureExtractor(feature_size=1, sampling_rate=24000, hop_length=960,
                                            padding_value=0.0)
    return model, text_tokenizer, codec, feature_extractor


@torch.no_grad()
def calibrate_decoder_(codec, gen: torch.Generator, target_rms: float = 0.1) -> None:
    """Scale the decoder's last conv so random codes decode at speech-like loudness (RMS 0.1):
    silence trimming at -50 dBFS then keeps audio instead of deleting all of it."""
    codes = torch.randint(0, codec.config.codebook_size, (1, codec.config.num_quantizers, 50),
                          generator=gen)
    rms = codec.decode(codes).audio_values.pow(2).mean().sqrt().item()
    conv2 = codec.acoustic_decoder.conv2
    conv2.weight.mul_(target_rms / rms)
    conv2.bias.mul_(target_rms / rms)


def write_checkpoint(out: Path, s: Sizes, demo: bool) -> None:
    model, text_tokenizer, codec, feature_extractor = build_models(s)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    if demo:  # the engine tells the demo model by this flag (upstream ignores unknown config keys)
        config = out / "config.json"
        fields = json.loads(config.read_text())
        config.write_text(json.dumps({**fields, DEMO_FLAG: True}, indent=2, sort_keys=True) + "\n")
    text_tokenizer.save_pretrained(out)
    codec.save_pretrained(out / "audio_tokenizer")
    feature_extractor.save_pretrained(out / "audio_tokenizer")
    check_roundtrip(out, model, codec)
    n_lm = sum(p.numel() for p in model.parameters())
    n_codec = sum(p.numel() for p in codec.parameters())
    print(f"wrote {out}: LM {n_lm / 1e6:.3f} M params, codec {n_codec / 1e6:.3f} M params, "
          f"vocab {len(text_tokenizer)}")


def write_codec(out: Path, s: Sizes) -> None:
    """The codec alone at sizes `s` in `out/audio_tokenizer` (for codec benchmarks: no omnivoice needed); drawn
    as `build_models` draws it, from a generator of its own, so its numbers are not the whole checkpoint's."""
    from transformers import HiggsAudioV2TokenizerModel

    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    codec = HiggsAudioV2TokenizerModel(build_codec_config(s)).eval()
    randomize_(codec, gen)
    calibrate_decoder_(codec, gen)
    codec.save_pretrained(out / "audio_tokenizer")
    print(f"wrote {out / 'audio_tokenizer'}: codec {sum(p.numel() for p in codec.parameters()) / 1e6:.3f} M params")


def check_roundtrip(out: Path, model, codec) -> None:
    """Reload every part with upstream's loaders and demand identical tensors. (The LM is loaded
    with `train=True`, which skips attaching the codec: upstream attaches it with a device_map,
    which needs `accelerate`; the goldens recorder loads the whole folder the normal way.)"""
    from transformers import AutoTokenizer, HiggsAudioV2TokenizerModel

    OmniVoice, _ = import_omnivoice()
    loaded_model = OmniVoice.from_pretrained(str(out), train=True)
    loaded_codec = HiggsAudioV2TokenizerModel.from_pretrained(str(out / "audio_tokenizer"))
    for name, want, got in (("model", model, loaded_model), ("audio_tokenizer", codec, loaded_codec)):
        want_sd, got_sd = want.state_dict(), got.state_dict()
        if want_sd.keys() != got_sd.keys():
            raise SystemExit(f"{name}: key mismatch {sorted(want_sd.keys() ^ got_sd.keys())[:10]}")
        bad = [k for k in want_sd if not torch.equal(want_sd[k], got_sd[k])]
        if bad:
            raise SystemExit(f"{name}: tensors differ after reload: {bad[:10]}")
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    if loaded_model.config.llm_config.vocab_size != len(tokenizer):
        raise SystemExit("config vocab_size differs from the tokenizer length")
    for token in OMNIVOICE_SPECIALS:
        if len(tokenizer(token, add_special_tokens=False).input_ids) != 1:
            raise SystemExit(f"{token} is not a single token")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny checkpoint (the default)")
    parser.add_argument("--full", metavar="OUTDIR", type=Path,
                        help="released sizes with random weights, written to OUTDIR")
    parser.add_argument("--out", type=Path, default=TINY_DIR, help="output folder for --tiny")
    parser.add_argument("--codec-only", metavar="OUTDIR", type=Path,
                        help="the codec alone at the released sizes, random weights, written to OUTDIR/audio_tokenizer")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    if args.codec_only is not None:
        write_codec(args.codec_only, FULL)
    elif args.full is not None:
        write_checkpoint(args.full, FULL, demo=False)
    else:
        write_checkpoint(args.out, TINY, demo=True)


if __name__ == "__main__":
    main()
