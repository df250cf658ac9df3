"""Record golden outputs of upstream OmniVoice on the committed tiny checkpoint.

Upstream (PyPI omnivoice 0.2.1) is the reference our engine must match; it is never imported by
the engine or the tests. This script runs it on CPU in float32 with deterministic algorithms and
writes tests/data/goldens/ (safetensors for tensors, JSON for the rest, WAV reference clips) plus
tests/data/goldens/README.md, which documents every file and key.

Re-record (about 5 minutes on 2 CPU cores), from the repository root:

    UPSTREAM_PY tests/goldens/record_goldens.py   # a Python with torch, torchaudio, transformers and omnivoice 0.2.1

Environment it was recorded with (also written to goldens/versions.json): Python 3.11,
torch 2.9.1 (CPU), torchaudio 2.9.1, transformers 5.24.0, omnivoice 0.2.1 (wheel installed with
`pip install --no-deps`), accelerate 1.15.0 (upstream's codec loading needs it), pydub 0.25.1,
soundfile 0.14.0, numpy 2.4.6. Upstream's internals are observed by wrapping its methods here
(`_generate_iterative`, `_prepare_inference_inputs`, `forward`, `_predict_tokens_with_scoring`,
`_post_process_audio`, codec submodule hooks); upstream's files are never edited.
"""
from __future__ import annotations

import dataclasses
import json
import platform
import shutil
import sys
import unicodedata
from importlib.metadata import version
from pathlib import Path

import numpy as np
import omnivoice.models.omnivoice as ov
import soundfile as sf
import torch
import torch.nn.functional as F
import torchaudio
from omnivoice import OmniVoice, OmniVoiceGenerationConfig
from omnivoice.utils import audio as ov_audio
from omnivoice.utils import text as ov_text
from omnivoice.utils import voice_design as ov_design
from omnivoice.utils.lang_map import LANG_NAME_TO_ID, lang_display_name
from safetensors.torch import save_file

REPO = Path(__file__).resolve().parents[2]
CHECKPOINT = REPO / "engine" / "data" / "demo_model"
OUT = REPO / "tests" / "data" / "goldens"
SR = 24000

INVENTORY: list[tuple[str, str, str, list[int]]] = []  # (file, key, dtype, shape) for the README


# ----------------------------------------------------------------------------------------------
# Writing helpers
# ----------------------------------------------------------------------------------------------

def write_tensors(rel: str, tensors: dict[str, torch.Tensor | np.ndarray]) -> None:
    path = OUT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = {}
    for key, value in tensors.items():
        t = torch.from_numpy(np.ascontiguousarray(value)) if isinstance(value, np.ndarray) else value
        clean[key] = t.detach().cpu().contiguous()
    save_file(clean, str(path))
    for key in sorted(clean):
        INVENTORY.append((rel, key, str(clean[key].dtype).replace("torch.", ""), list(clean[key].shape)))


def write_json(rel: str, data) -> None:
    path = OUT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    INVENTORY.append((rel, "-", "json", []))


def mono(x: np.ndarray) -> torch.Tensor:
    """(1, N) float32 numpy -> (N,) float32 torch."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32).reshape(-1))


# ----------------------------------------------------------------------------------------------
# Reference clips (synthetic, made here)
# ----------------------------------------------------------------------------------------------

def voiced(duration: float, sr: int, segments: list[tuple[float, float]], level: float,
           seed: int) -> np.ndarray:
    """Voice-like signal: 10 harmonics of a 130 Hz f0 with 5.5 Hz vibrato and a slow glide,
    a 4 Hz syllable envelope (never below 30 %), breath noise, silence outside `segments`
    (10 ms raised-cosine edges) and a -75 dBFS noise floor everywhere."""
    rng = np.random.RandomState(seed)
    t = np.arange(int(round(duration * sr))) / sr
    f0 = 130.0 * (1 + 0.03 * np.sin(2 * np.pi * 5.5 * t)) + 15.0 * np.sin(2 * np.pi * 0.3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    harmonics = sum(np.sin(k * phase + 0.7 * k) / k for k in range(1, 11))
    harmonics /= np.abs(harmonics).max()
    envelope = 0.65 + 0.35 * np.sin(2 * np.pi * 4.0 * t)
    gate = np.zeros_like(t)
    ramp = 0.01
    for start, end in segments:
        inside = (t >= start) & (t < end)
        edge = np.minimum(np.clip((t - start) / ramp, 0, 1), np.clip((end - t) / ramp, 0, 1))
        gate[inside] = 0.5 - 0.5 * np.cos(np.pi * edge[inside])
    breath = 0.03 * rng.randn(len(t))
    floor = 10 ** (-75 / 20) * rng.randn(len(t))
    return (level * (harmonics * envelope + breath) * gate + floor).astype(np.float32)


CLIPS = {
    # name: (file, sample rate, subtype, channels, duration, speech segments, level, seed)
    "voice_6s": ("clips/voice_6s.wav", 24000, "PCM_16", 1, 6.0,
                 [(0.30, 1.80), (2.10, 3.70), (4.30, 5.60)], 0.45, 1),
    "voice_2s": ("clips/voice_2s.wav", 24000, "PCM_24", 1, 2.0,
                 [(0.20, 0.85), (1.45, 1.75)], 0.12, 2),
    "voice_2s_stereo_44k": ("clips/voice_2s_stereo_44k.wav", 44100, "PCM_16", 2, 2.0,
                            [(0.20, 0.85), (1.45, 1.75)], 0.12, 2),
    "voice_25s": ("clips/voice_25s_16k.wav", 16000, "PCM_16", 1, 25.0,
                  [(0.20, 2.80), (3.10, 5.80), (6.10, 20.00), (20.40, 24.60)], 0.40, 3),
}
TRANSCRIPTS = {
    "voice_6s": "This is a short reference sentence, spoken slowly enough to last about six seconds",
    "voice_2s": "Xin chào các bạn",
    "voice_2s_stereo_44k": "Xin chào các bạn",
    "voice_25s": ("For twenty five seconds I will keep talking, so that the reference clip is long "
                  "enough to be trimmed when no transcript is given. The middle part runs on "
                  "without any pause at all, on and on, for a good fourteen seconds, and then it "
                  "stops. After one more short pause there is a final phrase to close the clip."),
}


def make_clips() -> None:
    for name, (rel, sr, subtype, channels, duration, segments, level, seed) in CLIPS.items():
        left = voiced(duration, sr, segments, level, seed)
        if channels == 2:
            right = 0.8 * left + 10 ** (-60 / 20) * np.random.RandomState(seed + 100).randn(len(left))
            data = np.stack([left, right.astype(np.float32)], axis=1)
        else:
            data = left
        (OUT / rel).parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(OUT / rel), data, sr, subtype=subtype)
        INVENTORY.append((rel, "-", "wav", [len(left), channels] if channels == 2 else [len(left)]))


# ----------------------------------------------------------------------------------------------
# Audio pipeline and codec
# ----------------------------------------------------------------------------------------------

class CodecTaps:
    """Forward hooks on the codec's submodules; `record()` collects one encode or decode."""

    def __init__(self, codec):
        self.codec, self.data, self.margins = codec, {}, []
        codec.semantic_model.register_forward_pre_hook(self._pre("semantic_input"))
        codec.encoder_semantic.register_forward_hook(self._post("e_semantic"))
        codec.acoustic_encoder.register_forward_pre_hook(self._pre("acoustic_input"))
        codec.acoustic_encoder.register_forward_hook(self._post("e_acoustic"))
        codec.fc.register_forward_hook(self._post("embeddings"))
        codec.fc2.register_forward_hook(self._post("fc2_out"))
        codec.fc2.register_forward_pre_hook(self._pre("quantized"))
        codec.acoustic_decoder.register_forward_hook(self._post("audio_values"))
        semantic = codec._extract_semantic_features

        def extract(input_values):
            out = semantic(input_values)
            self.data["semantic_features"] = out.clone()
            return out

        codec._extract_semantic_features = extract
        codebook_cls = type(codec.quantizer.quantizers[0].codebook)
        quantize = codebook_cls.quantize
        taps = self

        def quantize_with_margin(cb, hidden_states):
            embed = cb.embed.t()
            dist = -(hidden_states.pow(2).sum(1, keepdim=True) - 2 * hidden_states @ embed
                     + embed.pow(2).sum(0, keepdim=True))
            top = dist.topk(2, dim=-1).values
            taps.margins.append(float((top[:, 0] - top[:, 1]).min().detach()))
            return quantize(cb, hidden_states)

        codebook_cls.quantize = quantize_with_margin

    def _pre(self, key):
        def hook(module, args):
            self.data[key] = args[0].clone()
        return hook

    def _post(self, key):
        def hook(module, args, output):
            self.data[key] = output.clone()
        return hook

    def reset(self) -> None:
        self.data, self.margins = {}, []


def record_audio_pipeline(model: OmniVoice, taps: CodecTaps) -> dict:
    """Upstream's reference path step by step (create_voice_clone_prompt, with a transcript),
    cross-checked against create_voice_clone_prompt itself."""
    tensors, meta = {}, {"sample_rate": SR, "clips": {}}
    for name, (rel, sr, subtype, channels, *_rest) in CLIPS.items():
        path = str(OUT / rel)
        loaded = ov_audio.load_audio(path, SR)  # (1, N) float32: mono, 24 kHz
        rms = float(np.sqrt(np.mean(loaded ** 2)))
        boosted = loaded * 0.1 / rms if 0 < rms < 0.1 else loaded
        trimmed = ov_audio.trim_long_audio(boosted, SR, trim_threshold=20.0)
        preprocessed = ov_audio.remove_silence(boosted, SR, mid_sil=200, lead_sil=100, trail_sil=200)
        hop = model.audio_tokenizer.config.hop_length
        prompt_len = preprocessed.shape[-1] - preprocessed.shape[-1] % hop
        prompt_wave = preprocessed[:, :prompt_len]
        taps.reset()
        with torch.inference_mode():
            codes = model.audio_tokenizer.encode(torch.from_numpy(prompt_wave)[None]).audio_codes[0]
        margins = list(taps.margins)
        prompt = model.create_voice_clone_prompt(path, ref_text=TRANSCRIPTS[name])
        assert torch.equal(prompt.ref_audio_tokens, codes), name
        assert abs(prompt.ref_rms - rms) < 1e-9, name
        meta["clips"][name] = {
            "file": rel, "file_sample_rate": sr, "file_subtype": subtype, "file_channels": channels,
            "transcript": TRANSCRIPTS[name], "prompt_ref_text": prompt.ref_text,
            "loaded_num_samples": int(loaded.shape[-1]), "rms": rms, "boosted": bool(0 < rms < 0.1),
            "trimmed_num_samples": int(trimmed.shape[-1]),
            "preprocessed_num_samples": int(preprocessed.shape[-1]),
            "prompt_num_samples": int(prompt_len), "num_frames": int(codes.shape[-1]),
            "encode_min_codebook_margin": margins,
        }
        tensors[f"{name}.codes"] = codes
        # The long clip keeps just its trim (a prefix of its loaded samples): 7 MB less.
        if name == "voice_25s":
            tensors[f"{name}.trimmed"] = mono(trimmed)
        else:
            tensors[f"{name}.loaded"] = mono(loaded)
            tensors[f"{name}.preprocessed"] = mono(preprocessed)

    # Without a transcript upstream trims long clips before silence removal; ASR is replaced by
    # a fixed string, which only becomes the prompt's text.
    asr_text = "transcribed by a stand-in"
    model._asr_pipe, model.transcribe = "stand-in", lambda audio: asr_text
    prompt = model.create_voice_clone_prompt(str(OUT / CLIPS["voice_25s"][0]), ref_text=None)
    model._asr_pipe = None
    del model.transcribe
    tensors["voice_25s.no_transcript.codes"] = prompt.ref_audio_tokens
    meta["no_transcript_prompt"] = {"clip": "voice_25s", "ref_text_from_asr": asr_text,
                                    "prompt_ref_text": prompt.ref_text,
                                    "num_frames": int(prompt.ref_audio_tokens.shape[-1])}
    write_tensors("audio.safetensors", tensors)
    write_json("audio.json", meta)
    return meta


def record_codec_internals(model: OmniVoice, taps: CodecTaps) -> None:
    """Every stage of one encode and one decode, on voice_2s's prompt waveform."""
    codec = model.audio_tokenizer
    loaded = ov_audio.load_audio(str(OUT / CLIPS["voice_2s"][0]), SR)
    rms = float(np.sqrt(np.mean(loaded ** 2)))
    wave = ov_audio.remove_silence(loaded * 0.1 / rms, SR, mid_sil=200, lead_sil=100, trail_sil=200)
    wave = wave[:, : wave.shape[-1] - wave.shape[-1] % codec.config.hop_length]
    with torch.inference_mode():
        taps.reset()
        codes = codec.encode(torch.from_numpy(wave)[None]).audio_codes
        enc = dict(taps.data)
        taps.reset()
        audio = codec.decode(codes).audio_values
        dec = dict(taps.data)
    tensors = {
        "encode.input_values": torch.from_numpy(wave)[None],
        "encode.semantic_input": enc["semantic_input"],
        "encode.semantic_features": enc["semantic_features"],
        "encode.e_semantic": enc["e_semantic"],
        "encode.acoustic_input": enc["acoustic_input"],
        "encode.e_acoustic": enc["e_acoustic"],
        "encode.embeddings": enc["embeddings"],
        "encode.audio_codes": codes,
        "decode.quantized": dec["quantized"],
        "decode.fc2_out": dec["fc2_out"],
        "decode.audio_values": audio,
    }
    assert torch.equal(dec["audio_values"], audio)
    write_tensors("codec.safetensors", tensors)


def record_resample() -> None:
    tensors, pairs = {}, [(16000, 24000), (44100, 24000), (48000, 24000), (22050, 24000),
                          (8000, 24000), (24000, 16000)]
    for orig, new in pairs:
        t = np.arange(int(0.25 * orig)) / orig
        chirp = 0.5 * np.sin(2 * np.pi * (100 * t + 0.5 * 20000 * t ** 2))  # 100 Hz -> 5.1 kHz
        x = (chirp + 0.05 * np.random.RandomState(orig).randn(len(t))).astype(np.float32)[None]
        y = torchaudio.functional.resample(torch.from_numpy(x), orig_freq=orig, new_freq=new)
        tensors[f"{orig}_to_{new}.input"] = torch.from_numpy(x)
        tensors[f"{orig}_to_{new}.output"] = y
    write_tensors("resample.safetensors", tensors)


def record_postprocess(model: OmniVoice) -> None:
    """`_post_process_audio` for both loudness branches on a clip with a 1.2 s pause (more than
    twice the 500 ms kept on each side, so the mid-silence removal shortens it)."""
    x = voiced(2.5, SR, [(0.2, 0.8), (2.0, 2.4)], 0.3, seed=4)[None]
    cases = {"ref_rms_none": (None, True, 0.1, 0.1), "ref_rms_0.05": (0.05, True, 0.1, 0.1),
             "ref_rms_0.2": (0.2, True, 0.1, 0.1), "ref_rms_none.no_postprocess": (None, False, 0.1, 0.1),
             "ref_rms_0.05.pad_0.3.fade_0.02": (0.05, True, 0.3, 0.02),
             "ref_rms_none.pad_0.fade_0": (None, True, 0.0, 0.0),
             "ref_rms_0.2.pad_0.05.fade_2": (0.2, False, 0.05, 2.0)}  # fade longer than half the clip
    tensors = {"input": mono(x)}
    meta = {"input": "key `input` as (1, N)", "cases": {}}
    for name, (ref_rms, post, pad, fade) in cases.items():
        cfg = OmniVoiceGenerationConfig(postprocess_output=post, pad_duration=pad, fade_duration=fade)
        tensors[name] = mono(model._post_process_audio(x.copy(), ref_rms=ref_rms, gen_config=cfg))
        meta["cases"][name] = {"ref_rms": ref_rms, "postprocess_output": post,
                               "pad_duration": cfg.pad_duration, "fade_duration": cfg.fade_duration}
    write_tensors("postprocess.safetensors", tensors)
    write_json("postprocess.json", meta)


# ----------------------------------------------------------------------------------------------
# Text side
# ----------------------------------------------------------------------------------------------

TEXTS = [
    "Hello world.",
    "The quick brown fox jumps over the lazy dog",
    "Dr. Smith paid $1,234.56 on 3/14/2025 at 10:30 a.m.!",
    "  Leading and   trailing   spaces  ",
    "Tabs\tand\nnew lines\r\nmixed",
    "Wait... what?! (Really?)",
    "[laughter] Oh my [sigh] fine, [question-en] ok?",
    "Xin chào, tôi tên là Minh.",
    "Tiếng Việt có dấu: à á ả ã ạ ă ằ ắ ẳ ẵ ặ.",
    unicodedata.normalize("NFD", "Tiếng Việt viết kiểu tổ hợp"),
    "你好，世界！",
    "今天天气很好 我们去公园吧。",
    "中文（括号）测试",
    "他说 hello 然后 走了",
    "こんにちは、世界。",
    "カタカナ テスト",
    "漢字とひらがな",
    "안녕하세요",
    "1234567890",
    "Call 555-0134 now",
    "!!!???...",
    "—–‒… «»",
    "I love it 😍🎉",
    "👍",
    "bell\x07char and \x1b[31mred\x1b[0m",
    "zero\u200bwidth\u00a0space",
    "Mixed 中文 and English, plus tiếng Việt.",
    "Русский текст и English",
    "العربية",
    "हिन्दी",
    "ไทย",
    "Ｆｕｌｌｗｉｄｔｈ",
    "",
    " ",
]
COMBINE_REF_TEXTS = [None, "Reference words.", "参考文本。"]
LONG_TEXTS = {
    "en": ("It was a bright cold day in April, and the clocks were striking thirteen. Mr. Brown "
           "walked to the station at 7:45 a.m., i.e. earlier than usual. He bought a paper, read "
           "the headlines, and sighed; nothing ever changed! Did it matter? Perhaps not. The train "
           "arrived, the doors opened, and the crowd moved as one. At the office, Dr. Green was "
           "already waiting: \"You are late,\" she said, \"and we have a lot to do today.\" He "
           "smiled, sat down, and began to work through the long list of tasks, one by one, until "
           "the sun went down and the city lights came on again."),
    "zh": ("今天早上天气很好，我们一起去公园散步。公园里有很多人，有的在跑步，有的在打太极拳。"
           "小朋友们在草地上玩耍，笑声不断！中午的时候，我们在湖边吃了午饭；下午又去了博物馆，"
           "看了很多有趣的展览。你觉得这样的周末怎么样？我觉得非常充实，也很放松。"
           "晚上回到家，大家都累了，但是心情很好。"),
    "vi": ("Hôm nay trời đẹp, chúng tôi cùng nhau đi dạo trong công viên. Có rất nhiều người, "
           "người thì chạy bộ, người thì tập thể dục! Buổi trưa, chúng tôi ăn cơm bên hồ; buổi "
           "chiều lại đi thăm bảo tàng và xem nhiều triển lãm thú vị. Bạn thấy cuối tuần như vậy "
           "thế nào? Tôi thấy rất vui, và cũng rất thư giãn. Buổi tối về nhà, ai cũng mệt, nhưng "
           "tâm trạng thì rất tốt."),
}
LANGUAGE_INPUTS = [None, "None", "none", "", "English", "english", "ENGLISH", " en ", "en", "EN",
                   "eng", "Vietnamese", "vi", "Chinese", "zh", "zh-CN", "Mandarin", "Japanese", "ja",
                   "Cantonese", "yue", "French", "fr", "German", "Deutsch", "pt-BR", "Klingon", "xx"]
INSTRUCT_VALID = [
    ("female, low pitch, british accent", False),
    ("Male", False),
    ("male, elderly", False),
    ("male, elderly", True),
    ("FEMALE , Child", False),
    ("female，young adult", False),
    (",male, whisper,", False),
    ("男，河南话", False),
    ("女，青年，高音调", False),
    ("female, low pitch", True),
    ("male, 四川话", False),
    ("male, middle-aged, very high pitch, american accent", True),
    ("   ", False),
]
INSTRUCT_INVALID = [("robot voice", False), ("femal, low pich", False), ("male, female", False),
                    ("british accent, 四川话", False)]


NORMALIZE_TEXTS = {
    # language as passed to generate(): each goes through upstream's _resolve_language first
    "en": ["Dr. Smith paid $1,234.56 on 3/14/2025 at 10:30 a.m.!", "He was born in 1990 and is 35 now.",
           "Call 555-0134 or +1 (800) 555-0199.", "It weighs 2.5kg and costs 12% more, i.e. 3x.",
           "The [laughter] 2 cats ate [B EY1 S] 10 fish.", "  Padded 7 spaces  ", "No digits at all.",
           "Chapter IV, page 23, 1st of May 2024, 09:05.", "[sigh][laughter]", "-42 and 3.14159 and 1/2"],
    "zh": ["今天是2025年3月14日，价格是199元。", "他说 2345", "温度是-3.5度，湿度80%。",
           "电话：13812345678，时间10:30。", "NI3 HAO3，我有2个苹果[laughter]。", "第1章 共3节"],
    "German": ["Ich habe 42 Äpfel und 3 Birnen.", "Am 3.10.2024 um 14:30 Uhr kostet es 19,99 €.",
               "Er ist 1990 geboren [laughter] und 35 Jahre alt."],
    "fr": ["J'ai 21 ans et 1000 euros.", "Le 14 juillet 1789, à 15h30.", "Il a 2,5 kg [B EY1 S] de 7 pommes."],
    "es": ["Tengo 15 años y 1000000 de pesos."],
    "vi": ["Tôi có 3 con mèo và 12 con chó."],
    "ja": ["りんごが3個あります。"],
    "Klingon": ["An unknown language keeps 42 as digits."],
    None: ["Auto: 25 apples.", "自动：25个苹果。"],
}


def record_text(model: OmniVoice, clone_meta: dict) -> None:
    est = model.duration_estimator
    ref6 = clone_meta["clips"]["voice_6s"]
    ref_text6, ref_frames6 = ref6["prompt_ref_text"], ref6["num_frames"]
    chars = sorted({c for s in TEXTS + list(LONG_TEXTS.values()) for c in s})
    strings = []
    for s in TEXTS:
        strings.append({
            "text": s,
            "weight": est.calculate_total_weight(s),
            "estimate_fallback": est.estimate_duration(s, "Nice to meet you.", 25),
            "estimate_voice_6s": est.estimate_duration(s, ref_text6, ref_frames6),
            "target_tokens": {
                "no_ref.speed_1.0": model._estimate_target_tokens(s, None, None, speed=1.0),
                "no_ref.speed_1.3": model._estimate_target_tokens(s, None, None, speed=1.3),
                "voice_6s.speed_1.0": model._estimate_target_tokens(s, ref_text6, ref_frames6, 1.0),
                "voice_6s.speed_0.8": model._estimate_target_tokens(s, ref_text6, ref_frames6, 0.8),
            },
            "combine_text": {str(r): ov._combine_text(s, ref_text=r) for r in COMBINE_REF_TEXTS},
            "add_punctuation": ov_text.add_punctuation(s),
            "text_ids": ov._tokenize_with_nonverbal_tags(
                f"<|text_start|>{ov._combine_text(s)}<|text_end|>", model.text_tokenizer)[0].tolist(),
        })
    chunks = {}
    for lang, text in LONG_TEXTS.items():
        target = model._estimate_target_tokens(text, None, None)
        for duration in (15.0, 3.0):
            chunk_len = int(duration * 25 / (target / len(text)))
            chunks[f"{lang}.duration_{duration:g}"] = {
                "text": text, "target_tokens": target, "audio_chunk_duration": duration,
                "chunk_len": chunk_len, "min_chunk_len": 3,
                "chunks": ov_text.chunk_text_punctuation(text, chunk_len=chunk_len, min_chunk_len=3)}
    for chunk_len in (1, 10):
        chunks[f"en.chunk_len_{chunk_len}.no_min"] = {
            "text": LONG_TEXTS["en"], "chunk_len": chunk_len, "min_chunk_len": None,
            "chunks": ov_text.chunk_text_punctuation(LONG_TEXTS["en"], chunk_len=chunk_len)}
    invalid = []
    for s, use_zh in INSTRUCT_INVALID:
        try:
            ov._resolve_instruct(s, use_zh=use_zh)
            raise AssertionError(f"{s!r} should be rejected")
        except ValueError as e:
            invalid.append({"instruct": s, "use_zh": use_zh, "error": str(e)})
    style = {}
    for lang, instruct, denoise, has_ref in [(None, None, True, True), ("en", None, True, True),
                                             ("vi", "female, low pitch", False, True),
                                             ("zh", "男，老年", True, False)]:
        s = ""
        if denoise and has_ref:
            s += "<|denoise|>"
        s += f"<|lang_start|>{lang or 'None'}<|lang_end|>"
        s += f"<|instruct_start|>{instruct or 'None'}<|instruct_end|>"
        style[f"{lang}|{instruct}|denoise={denoise}|ref={has_ref}"] = {
            "style_text": s, "ids": model.text_tokenizer(s).input_ids}
    write_json("text.json", {
        "ref_for_estimates": {"fallback": {"ref_text": "Nice to meet you.", "ref_frames": 25},
                              "voice_6s": {"ref_text": ref_text6, "ref_frames": ref_frames6}},
        "char_weights": {c: est._get_char_weight(c) for c in chars},
        "strings": strings,
        "chunks": chunks,
        "languages": [{"input": x, "resolved": ov._resolve_language(x)} for x in LANGUAGE_INPUTS],
        "instruct_valid": [{"instruct": s, "use_zh": z, "resolved": ov._resolve_instruct(s, use_zh=z)}
                           for s, z in INSTRUCT_VALID],
        "instruct_invalid": invalid,
        "instruct_vocabulary": {
            "valid_en": sorted(ov_design._INSTRUCT_VALID_EN),
            "valid_zh": sorted(ov_design._INSTRUCT_VALID_ZH),
            "en_to_zh": dict(sorted(ov_design._INSTRUCT_EN_TO_ZH.items())),
            "mutually_exclusive": [sorted(c) for c in ov_design._INSTRUCT_MUTUALLY_EXCLUSIVE]},
        "style_tokens": style,
        "normalize": [{"text": t, "language": lang, "resolved": ov._resolve_language(lang),
                       "normalized": ov_text.normalize_text(t, ov._resolve_language(lang))}
                      for lang, texts in NORMALIZE_TEXTS.items() for t in texts],
    })
    write_json("languages.json", {
        lang_id: {"name": name, "display_name": lang_display_name(name)}
        for name, lang_id in sorted(LANG_NAME_TO_ID.items(), key=lambda kv: kv[1])})


# ----------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------

class GenerationTaps:
    """Wraps upstream's generation internals (patching the class for the rest of this recording
    process) and keeps what one `generate()` call did."""

    def __init__(self):
        self.calls, self.post = [], []
        taps = self
        gen_iter, prepare, forward = (OmniVoice._generate_iterative,
                                      OmniVoice._prepare_inference_inputs, OmniVoice.forward)
        score, post = OmniVoice._predict_tokens_with_scoring, OmniVoice._post_process_audio

        def generate_iterative(model, task, cfg):
            taps.calls.append({"task": task, "cfg": cfg, "inputs": [], "step_inputs": [],
                               "scores": [], "gaps": []})
            out = gen_iter(model, task, cfg)
            taps.calls[-1]["tokens"] = [t.clone() for t in out]
            return out

        def prepare_inputs(model, *args, **kwargs):
            out = prepare(model, *args, **kwargs)
            taps.calls[-1]["inputs"].append({k: v.clone() for k, v in out.items()})
            return out

        def model_forward(model, input_ids, audio_mask, **kwargs):
            out = forward(model, input_ids, audio_mask, **kwargs)
            call = taps.calls[-1] if taps.calls else None
            if call is not None:
                call["step_inputs"].append(input_ids.clone())
                if "step0_logits" not in call:
                    call["step0_logits"] = out.logits.float().clone()
                    call["audio_mask"] = audio_mask.clone()
            return out

        def predict(model, c_logits, u_logits, cfg):
            tokens, scores = score(model, c_logits, u_logits, cfg)
            if cfg.guidance_scale != 0:
                c, u = F.log_softmax(c_logits, -1), F.log_softmax(u_logits, -1)
                lp = torch.log_softmax(c + cfg.guidance_scale * (c - u), -1)
            else:
                lp = F.log_softmax(c_logits, -1)
            lp[..., model.config.audio_mask_id] = -float("inf")
            top = lp.topk(2, dim=-1).values
            call = taps.calls[-1]
            call["scores"].append((tokens[0].clone(), scores[0].clone()))
            call["gaps"].append((top[..., 0] - top[..., 1])[0])
            return tokens, scores

        def post_process(model, generated_audio, ref_rms, gen_config):
            out = post(model, generated_audio, ref_rms, gen_config)
            taps.post.append((generated_audio.copy(), out.copy(), ref_rms))
            return out

        OmniVoice._generate_iterative = generate_iterative
        OmniVoice._prepare_inference_inputs = prepare_inputs
        OmniVoice.forward = model_forward
        OmniVoice._predict_tokens_with_scoring = predict
        OmniVoice._post_process_audio = post_process

    def reset(self) -> None:
        self.calls, self.post = [], []


def clip_path(name: str) -> str:
    return str(OUT / CLIPS[name][0])


GREEDY = {"position_temperature": 0.0, "class_temperature": 0.0}
EN_SHORT = "Good morning, how are you today?"
REQUESTS = {
    "clone_6s": dict(text=EN_SHORT, language="English", ref_audio="voice_6s",
                     ref_text=TRANSCRIPTS["voice_6s"], **GREEDY),
    "clone_25s": dict(text="The long reference is kept whole here.", language="en",
                      ref_audio="voice_25s", ref_text=TRANSCRIPTS["voice_25s"], **GREEDY),
    "design_en": dict(text="A designed voice reads this line.", language="en",
                      instruct="female, low pitch, british accent", **GREEDY),
    "auto_en": dict(text="Well [laughter] that was fun, wasn't it?", **GREEDY),
    "vi_clone_stereo_44k": dict(text="Hôm nay trời đẹp quá.", language="Vietnamese",
                                ref_audio="voice_2s_stereo_44k", ref_text=TRANSCRIPTS["voice_2s"],
                                **GREEDY),
    "zh_design": dict(text="今天天气很好，我们去公园吧。", language="zh", instruct="male, elderly",
                      **GREEDY),
    "chunked_auto": dict(text="Hello there. Goodbye now.", language="en",
                         audio_chunk_threshold=1.0, audio_chunk_duration=0.8, **GREEDY),
    "chunked_clone": dict(text="One short line. Then another.", language="en",
                          ref_audio="voice_2s", ref_text=TRANSCRIPTS["voice_2s"],
                          audio_chunk_threshold=1.0, audio_chunk_duration=0.8, **GREEDY),
    "speed_1.3": dict(text=EN_SHORT, language="en", ref_audio="voice_6s",
                      ref_text=TRANSCRIPTS["voice_6s"], speed=1.3, **GREEDY),
    "duration_3.0": dict(text=EN_SHORT, language="en", ref_audio="voice_6s",
                         ref_text=TRANSCRIPTS["voice_6s"], duration=3.0, **GREEDY),
    "no_denoise": dict(text=EN_SHORT, language="en", ref_audio="voice_6s",
                       ref_text=TRANSCRIPTS["voice_6s"], denoise=False, **GREEDY),
    "knobs": dict(text=EN_SHORT, language="en", ref_audio="voice_6s", ref_text=TRANSCRIPTS["voice_6s"],
                  num_step=8, guidance_scale=1.5, layer_penalty_factor=3.0, t_shift=0.2, **GREEDY),
    "no_cfg": dict(text="No guidance at all.", num_step=4, guidance_scale=0.0, **GREEDY),
    "no_preprocess": dict(text="Raw prompt, raw output.", language="vi", ref_audio="voice_2s",
                          ref_text="Xin chào các bạn", preprocess_prompt=False,
                          postprocess_output=False, **GREEDY),
}
# Requests whose decoded and final audio are stored (between them every post-processing branch:
# ref_rms >= 0.1, ref_rms < 0.1, no reference, chunk cross-fade, postprocess_output=False);
# the others keep tokens, lengths and loudness only (size).
REQUESTS.update({
    # preprocess_prompt=False keeps the transcript as typed: its spaces weigh in the duration estimate
    "transcript_as_typed": dict(text=EN_SHORT, language="en", ref_audio="voice_6s",
                                ref_text="   " + TRANSCRIPTS["voice_6s"] + "    ", preprocess_prompt=False,
                                **GREEDY),
    "pad_fade": dict(text=EN_SHORT, language="en", ref_audio="voice_2s", ref_text=TRANSCRIPTS["voice_2s"],
                     pad_duration=0.3, fade_duration=0.02, **GREEDY),
    "no_pad_fade": dict(text="No padding, no fades.", pad_duration=0.0, fade_duration=0.0, **GREEDY),
    # three and more chunks: chunk 0 (not the previous chunk) is the reference of every later one
    "chunked_auto_3": dict(text="Hello there. Goodbye now. See you soon. Take care.", language="en",
                           audio_chunk_threshold=1.0, audio_chunk_duration=0.8, **GREEDY),
    "chunked_clone_3": dict(text="One short line. Then another. And a third. The end.", language="en",
                            ref_audio="voice_2s", ref_text=TRANSCRIPTS["voice_2s"],
                            audio_chunk_threshold=1.0, audio_chunk_duration=0.8, **GREEDY),
    # generate(normalize_text=True), whose text goes through upstream's normalize_text first
    "normalize_en": dict(text="On 3/14/2025 I paid $12.50 for 2 books [laughter].", language="en",
                         ref_audio="voice_6s", ref_text=TRANSCRIPTS["voice_6s"], normalize_text=True, **GREEDY),
    "normalize_zh": dict(text="今天是2025年3月14日，价格是199元。", language="zh", instruct="male, elderly",
                         normalize_text=True, **GREEDY),
    "normalize_de": dict(text="Ich habe 42 Äpfel und 3 Birnen.", language="German", normalize_text=True,
                         **GREEDY),
    "normalize_fr": dict(text="J'ai 21 ans et 1000 euros.", language="fr", normalize_text=True, **GREEDY),
})
KEEP_AUDIO = {"clone_6s", "vi_clone_stereo_44k", "auto_en", "chunked_auto", "no_preprocess",
              "transcript_as_typed", "pad_fade", "no_pad_fade", "chunked_auto_3", "normalize_en"}
MIN_CALLS = {"chunked_auto_3": 3, "chunked_clone_3": 3}
# Seeded requests keep only their tokens; each has the prompt of a greedy request above.
SAMPLED = [
    ("sampled_seed_1234", 1234, dict(text=EN_SHORT, language="en", ref_audio="voice_6s",
                                     ref_text=TRANSCRIPTS["voice_6s"], num_step=8)),
    # class sampling (top 10 %, Gumbel) with position sampling: both draws interleave
    ("sampled_class_seed_77", 77, dict(text=EN_SHORT, language="en", ref_audio="voice_6s",
                                       ref_text=TRANSCRIPTS["voice_6s"], num_step=8, class_temperature=0.8)),
    # class sampling alone (greedy positions)
    ("sampled_class_only_seed_5", 5, dict(text="Well [laughter] that was fun, wasn't it?", num_step=8,
                                          position_temperature=0.0, class_temperature=1.5)),
]


GAPS: dict[str, list[torch.Tensor]] = {"step0_raw_logit_top2_gap": [], "picked_cfg_top2_gap": [],
                                      "step_margin": []}


def positions_for(t_len: int) -> list[int]:
    return sorted({0, t_len // 2, t_len - 1})


def call_record(call: dict, model: OmniVoice, prefix: str) -> tuple[dict, dict]:
    """Tensors and JSON facts of one `_generate_iterative` call (batch size 1)."""
    task, cfg = call["task"], call["cfg"]
    assert task.batch_size == 1
    t_len, mask_id = task.target_lens[0], model.config.audio_mask_id
    cond_ids, cond_audio_mask = call["inputs"][0]["input_ids"][0], call["inputs"][0]["audio_mask"][0]
    c_len = cond_ids.shape[-1]
    tokens = call["tokens"][0]
    # Target slots as each forward saw them, then the final tokens: diffs give the unmask order.
    states = [ids[0, :, c_len - t_len:c_len] for ids in call["step_inputs"]] + [tokens]
    schedule, order, margins, min_gaps = [], [], [], []
    for step in range(len(call["step_inputs"])):
        newly = (states[step] == mask_id) & (states[step + 1] != mask_id)  # (8, T)
        flat = newly.flatten().nonzero().flatten()
        schedule.append(int(flat.numel()))
        order.append(flat)
        _pred, conf = call["scores"][step]
        score = conf - torch.arange(conf.shape[0])[:, None] * cfg.layer_penalty_factor
        score = score.masked_fill(states[step] != mask_id, -float("inf")).flatten()
        ranked = score.sort(descending=True).values
        k = schedule[-1]
        margins.append(float(ranked[k - 1] - ranked[k]) if 0 < k < int((states[step] == mask_id).sum())
                       else float("inf"))
        min_gaps.append(float(call["gaps"][step].flatten()[flat].min()) if k else float("inf"))
    step0 = call["step0_logits"]  # (2, 8, L, 1025): cond row 0, uncond row 1
    if cfg.position_temperature == 0:
        top = step0[0, :, c_len - t_len:c_len].topk(2, dim=-1).values
        GAPS["step0_raw_logit_top2_gap"].append((top[..., 0] - top[..., 1]).flatten())
        GAPS["picked_cfg_top2_gap"] += [g.flatten()[o] for g, o in zip(call["gaps"], order)]
        GAPS["step_margin"].append(torch.tensor(margins))
    pos = positions_for(t_len)
    pred0, conf0 = call["scores"][0]
    tensors = {
        "cond_input_ids": cond_ids,
        "cond_audio_mask": cond_audio_mask,
        "batch_audio_mask": call["audio_mask"],
        "step0_positions": torch.tensor(pos),
        "step0_logits": torch.stack([step0[0, :, [c_len - t_len + p for p in pos], :],
                                     step0[1, :, pos, :]]),
        "step0_pred_tokens": pred0,
        "step0_confidence": conf0,
        "schedule": torch.tensor(schedule),
        "unmask_order": torch.cat(order),
        "step_margin": torch.tensor(margins, dtype=torch.float32),
        "step_min_top2_gap": torch.tensor(min_gaps, dtype=torch.float32),
        "tokens": tokens,
    }
    ref = task.ref_audio_tokens[0]
    facts = {
        "text": task.texts[0], "ref_text": task.ref_texts[0], "lang": task.langs[0],
        "instruct": task.instructs[0], "target_len": t_len, "cond_len": c_len,
        "ref_len": None if ref is None else int(ref.shape[-1]),
        "speed": None if task.speed is None else task.speed[0],
        "schedule": schedule, "min_step_margin": min(margins), "min_top2_gap": min(min_gaps),
    }
    return {f"{prefix}{k}": v for k, v in tensors.items()}, facts


def run_request(model: OmniVoice, taps: GenerationTaps, name: str, kwargs: dict,
                seed: int | None = None) -> None:
    call_kwargs = dict(kwargs)
    if "ref_audio" in call_kwargs:
        call_kwargs["ref_audio"] = clip_path(call_kwargs["ref_audio"])
    taps.reset()
    if seed is not None:
        torch.manual_seed(seed)
    audio = model.generate(**call_kwargs)[0]
    cfg = OmniVoiceGenerationConfig.from_dict(kwargs)
    tensors, calls = {}, []
    for i, call in enumerate(taps.calls):
        t, facts = call_record(call, model, f"call{i}.")
        if i > 0:  # later chunks: same forward, new text; logits of the first call suffice (size)
            t = {k: v for k, v in t.items() if not k.endswith("step0_logits")}
        tensors.update(t)
        calls.append(facts)
    (raw, final, ref_rms), = taps.post
    assert np.array_equal(final.squeeze(0), audio)
    if name in KEEP_AUDIO:
        tensors["audio_decoded"] = mono(raw)
        tensors["audio"] = torch.from_numpy(audio.astype(np.float32))
    if seed is not None:  # information only: keep just the tokens; margins assume greedy picks
        tensors = {k: v for k, v in tensors.items() if k.endswith("tokens") and "step0" not in k}
        for facts in calls:
            del facts["min_step_margin"], facts["min_top2_gap"]
    request = dict(kwargs)
    if "ref_audio" in request:
        request["ref_audio"] = CLIPS[request["ref_audio"]][0]
    meta = {
        "request": request,
        "generation_config": dataclasses.asdict(cfg),
        "torch_seed": seed,
        "ref_rms": ref_rms,
        "num_calls": len(calls),
        "calls": calls,
        "audio_stored": name in KEEP_AUDIO,
        "audio_num_samples": int(audio.shape[-1]),
        "audio_rms": float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))),
        "audio_peak": float(np.abs(audio).max()),
        "audio_decoded_num_samples": int(raw.shape[-1]),
        "audio_decoded_rms": float(np.sqrt(np.mean(raw.astype(np.float64) ** 2))),
    }
    write_tensors(f"generate/{name}.safetensors", tensors)
    write_json(f"generate/{name}.json", meta)
    print(f"  {name}: calls={len(calls)} T={[c['target_len'] for c in calls]} "
          f"L={[c['cond_len'] for c in calls]} margins={[c.get('min_step_margin') for c in calls]} "
          f"gaps={[c.get('min_top2_gap') for c in calls]}", flush=True)


# ----------------------------------------------------------------------------------------------
# README
# ----------------------------------------------------------------------------------------------

def write_readme(versions: dict) -> None:
    head = Path(__file__).with_name("README_head.md").read_text(encoding="utf-8")
    lines = [head.rstrip(), "", "## Inventory (generated)", "",
             "Every file and tensor, as written by `record_goldens.py` (`json`/`wav` rows are whole "
             "files; a wav's shape is its frames and, for stereo, channels). "
             "`tests/test_checkpoint_smoke.py` checks this table against the files.", "",
             f"Recorded with: {', '.join(f'{k} {v}' for k, v in versions.items())}.", "",
             "| file | key | dtype | shape |", "|---|---|---|---|"]
    for rel, key, dtype, shape in INVENTORY:
        lines.append(f"| {rel} | {key} | {dtype} | {shape} |")
    (OUT / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "torchaudio": torchaudio.__version__, "transformers": version("transformers"),
                "omnivoice": version("omnivoice"), "pydub": version("pydub"),
                "soundfile": version("soundfile"), "numpy": np.__version__,
                "wetextprocessing": version("WeTextProcessing"), "pynini": version("pynini"),
                "num2words": version("num2words")}
    write_json("versions.json", versions)
    model = OmniVoice.from_pretrained(str(CHECKPOINT))
    assert model.dtype == torch.float32 and model.audio_tokenizer.dtype == torch.float32
    print("clips, audio pipeline, codec", flush=True)
    make_clips()
    codec_taps = CodecTaps(model.audio_tokenizer)
    clone_meta = record_audio_pipeline(model, codec_taps)
    record_codec_internals(model, codec_taps)
    record_resample()
    record_postprocess(model)
    print("text", flush=True)
    record_text(model, clone_meta)
    print("generation", flush=True)
    gen_taps = GenerationTaps()
    for name, kwargs in REQUESTS.items():
        run_request(model, gen_taps, name, kwargs)
    for name, seed, kwargs in SAMPLED:
        run_request(model, gen_taps, name, kwargs, seed=seed)
    quantiles = (0.0, 0.001, 0.01, 0.1, 0.5)
    write_json("gap_summary.json", {
        name: {"count": int(torch.cat(values).numel()),
               "quantiles": {str(q): float(torch.cat(values).float().quantile(q)) for q in quantiles}}
        for name, values in GAPS.items()})
    write_readme(versions)
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    sys.exit(main())
