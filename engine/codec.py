"""The HiggsAudioV2 audio codec of an OmniVoice checkpoint (`<ckpt>/audio_tokenizer/`).

24 kHz mono waveform <-> 8 codebooks of tokens at 25 Hz (one frame per 960 samples).

encode: HuBERT features of the 16 kHz-resampled clip (mean of all hidden states, every 2nd frame)
        -> semantic conv encoder; in parallel the DAC acoustic encoder on the 24 kHz clip;
        concatenated -> fc -> residual vector quantisation (8 codebooks, Euclidean nearest code).
decode: sum of the 8 code vectors (projected for every code at load) -> fc2 -> DAC decoder (no
        final tanh, ConvTranspose output_padding = stride % 2: the codec as trained, which
        transformers patches in).

With CUDA and Triton, each Snake activation is one fused kernel (kernels/snake.py) that also adds
the bias of the convolution before it and the residual connection, which PyTorch would each add
with a kernel of their own; it rounds as PyTorch does, so the output does not change. Elsewhere
the plain-PyTorch path runs, operation for operation as transformers.

The same numbers as transformers' HiggsAudioV2TokenizerModel, without importing it (it needs
torchaudio). HuBERT is transformers' own HubertModel; everything else is written here.
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from torch import nn
from torch.nn.utils import parametrize
from transformers.models.hubert.configuration_hubert import HubertConfig
from transformers.models.hubert.modeling_hubert import HubertModel

from engine.audio.resample import resample
from engine.constants import SAMPLE_RATE
from engine.conv import ConvPath, CudnnChoice, convolve
from engine.errors import AudioInputError, CheckpointError
from kernels import triton_available
from kernels.snake import SNAKE_DTYPES, snake, snake_input_ref, snake_ref

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Tensors the checkpoint carries for training or for the semantic reconstruction branch, which
# inference never uses: accepted, not loaded.
UNUSED_TENSORS = re.compile(
    r"^(decoder_semantic\.|fc1\.|semantic_model\.masked_spec_embed$"
    r"|quantizer\.quantizers\.\d+\.codebook\.(cluster_size|embed_avg|inited)$)"
)
HUBERT_PAD = 160  # samples of 16 kHz zero padding on each side before HuBERT, as upstream
# Piece lengths whose decodes launch the fused Snake in every variant Triton compiles for a decode of any length and
# for an encode of any clip (kernels.snake.variant; tests/engine/test_codec_warm_up.py checks 1-1500 frames of both at
# the released sizes): at 16 every Snake's length is a multiple of 16, at 17 the first ones' are not, short tiles and
# long ones in both; at 1 the first Snake's length is 1, which Triton compiles in as a constant (so does the last
# Snake of the encoder for a clip of one frame). The encoder's Snakes need no variant of their own: they add bias and
# residual as the decoder's do, over channels that are multiples of 16 and lengths of the same kinds.
WARM_UP_FRAMES = (1, 16, 17)
# How cuDNN computes the decodes its CudnnChoice gives it: in TF32, PyTorch's default (about 1e-3 from float32 on the
# output, where the other decodes, with ATen's own kernels, are full float32).
DECODER_CUDNN = ConvPath.CUDNN_TF32


@dataclass(frozen=True)
class CodecConfig:
    """The codec's shapes, read from `audio_tokenizer/config.json` (transformers' defaults for
    keys it leaves out)."""

    sample_rate: int = SAMPLE_RATE
    semantic_sample_rate: int = 16000
    downsample_factor: int = 320
    target_bandwidths: tuple[float, ...] = (0.5, 1, 1.5, 2, 4)
    codebook_size: int = 1024
    codebook_dim: int = 64
    kernel_size: int = 3
    channel_ratios: tuple[float, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    block_dilations: tuple[int, ...] = (1, 1)
    unit_kernel_size: int = 3
    encoder_hidden_size: int = 64
    decoder_hidden_size: int = 1024
    acoustic_hidden_size: int = 256
    downsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2)
    semantic: dict = field(default_factory=dict)  # HubertConfig keyword arguments

    @classmethod
    def from_json(cls, raw: dict) -> CodecConfig:
        acoustic = raw.get("acoustic_model_config") or {}
        semantic = {"mask_time_prob": 0.0, **(raw.get("semantic_model_config") or {})}
        top = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()
               if k in cls.__dataclass_fields__ and k != "semantic" and v is not None}
        if raw.get("codebook_dim") is None:  # transformers: the full hidden size
            top["codebook_dim"] = (acoustic.get("hidden_size", cls.acoustic_hidden_size)
                                   + semantic.get("hidden_size", 768))
        return cls(
            **top,
            encoder_hidden_size=acoustic.get("encoder_hidden_size", cls.encoder_hidden_size),
            decoder_hidden_size=acoustic.get("decoder_hidden_size", cls.decoder_hidden_size),
            acoustic_hidden_size=acoustic.get("hidden_size", cls.acoustic_hidden_size),
            downsampling_ratios=tuple(acoustic.get("downsampling_ratios", cls.downsampling_ratios)),
            upsampling_ratios=tuple(acoustic.get("upsampling_ratios", cls.upsampling_ratios)),
            semantic=semantic,
        )

    @property
    def hop_length(self) -> int:
        return math.prod(self.downsampling_ratios)

    @property
    def frame_rate(self) -> int:
        return math.ceil(self.sample_rate / self.hop_length)

    @property
    def num_quantizers(self) -> int:
        bits = math.ceil(math.log2(self.codebook_size))
        return int(1000 * self.target_bandwidths[-1] // (self.frame_rate * bits))

    @property
    def semantic_hidden_size(self) -> int:
        return self.semantic.get("hidden_size", 768)

    @property
    def hidden_size(self) -> int:
        return self.acoustic_hidden_size + self.semantic_hidden_size

    @property
    def semantic_stride(self) -> int:
        """HuBERT frames per codec frame (HuBERT runs at 50 Hz, the codec at 25 Hz)."""
        return int(self.hop_length / (self.sample_rate / self.semantic_sample_rate) / self.downsample_factor)


# ---------------------------------------------------------------------------------------------
# Acoustic path: the DAC encoder and decoder


@functools.cache
def _triton_installed_with_cuda() -> bool:
    return triton_available()


def use_triton(x: torch.Tensor) -> bool:
    """Whether the fused Snake kernel runs on tensors like x: CUDA tensors of a dtype it computes in,
    where Triton is installed (a float64 codec, the tests' exact reference, takes the plain path)."""
    return x.is_cuda and x.dtype in SNAKE_DTYPES and _triton_installed_with_cuda()


class PendingSum(NamedTuple):
    """`residual + (x + bias)`, left for the next Snake to add up within its own pass.

    Only the fused path leaves a convolution's bias here: on the plain-PyTorch path convolutions
    add their own, as in transformers, and `bias` is None.
    """

    x: torch.Tensor
    bias: torch.Tensor | None = None
    residual: torch.Tensor | None = None


def conv_pending(conv: nn.Conv1d | nn.ConvTranspose1d, x: torch.Tensor, *,
                 path: ConvPath = ConvPath.CUDNN_TF32) -> PendingSum:
    """conv(x), its bias left to the fused Snake that follows where that kernel runs; on CUDA by `path`
    (engine/conv.py; the encoder's: cuDNN in TF32, as PyTorch's own call by default)."""
    if not use_triton(x):
        return PendingSum(convolve(conv, x, bias=conv.bias, path=path))
    return PendingSum(convolve(conv, x, bias=None, path=path), conv.bias)


class Snake(nn.Module):
    """x + sin^2(alpha x) / alpha, per channel."""

    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor | PendingSum) -> torch.Tensor:
        return self._snake(x, keep_input=False)[0]

    def with_input(self, x: torch.Tensor | PendingSum) -> tuple[torch.Tensor, torch.Tensor]:
        """(Snake of the sum x stands for, that sum): the input a residual connection adds back."""
        return self._snake(x, keep_input=True)

    def _snake(self, x: torch.Tensor | PendingSum, keep_input: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = x if isinstance(x, PendingSum) else PendingSum(x)
        if use_triton(x.x):
            h = torch.empty_like(x.x) if keep_input else None
            return snake(x.x, self.alpha, bias=x.bias, residual=x.residual, input_out=h), h
        h = snake_input_ref(x.x, bias=x.bias, residual=x.residual)
        return snake_ref(h, self.alpha), h


class DacResidualUnit(nn.Module):
    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.snake1 = Snake(channels)
        self.conv1 = nn.Conv1d(channels, channels, kernel_size=7, dilation=dilation, padding=3 * dilation)
        self.snake2 = Snake(channels)
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=1)

    def forward(self, x: PendingSum, *, path: ConvPath = ConvPath.CUDNN_TF32) -> PendingSum:
        """h (the sum x stands for) -> h + conv2(snake2(conv1(snake1(h)))), that addition left pending."""
        y, h = self.snake1.with_input(x)
        y = self.snake2(conv_pending(self.conv1, y, path=path))
        return conv_pending(self.conv2, y, path=path)._replace(residual=h)


def _residual_units(channels: int) -> list[DacResidualUnit]:
    return [DacResidualUnit(channels, dilation) for dilation in (1, 3, 9)]


class DacEncoderBlock(nn.Module):
    def __init__(self, channels: int, stride: int):
        super().__init__()
        self.res_unit1, self.res_unit2, self.res_unit3 = _residual_units(channels)
        self.snake1 = Snake(channels)
        self.conv1 = nn.Conv1d(channels, 2 * channels, kernel_size=2 * stride, stride=stride,
                               padding=math.ceil(stride / 2))

    def forward(self, x: PendingSum) -> PendingSum:
        return conv_pending(self.conv1, self.snake1(self.res_unit3(self.res_unit2(self.res_unit1(x)))))


class DacEncoder(nn.Module):
    """(B, 1, n) at 24 kHz -> (B, acoustic_hidden, n / hop)."""

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        width = cfg.encoder_hidden_size
        self.conv1 = nn.Conv1d(1, width, kernel_size=7, padding=3)
        self.block = nn.ModuleList(DacEncoderBlock(width * 2**i, s) for i, s in enumerate(cfg.downsampling_ratios))
        width *= 2 ** len(cfg.downsampling_ratios)
        self.snake1 = Snake(width)
        self.conv2 = nn.Conv1d(width, cfg.acoustic_hidden_size, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pending = conv_pending(self.conv1, x)
        for block in self.block:
            pending = block(pending)
        return self.conv2(self.snake1(pending))

    def output_length(self, n: int) -> int:
        for conv in (m for m in self.modules() if isinstance(m, nn.Conv1d)):
            (k,), (s,), (p,), (d,) = conv.kernel_size, conv.stride, conv.padding, conv.dilation
            n = (n + 2 * p - d * (k - 1) - 1) // s + 1
        return n


class DacDecoderBlock(nn.Module):
    def __init__(self, channels: int, stride: int):
        super().__init__()
        self.snake1 = Snake(channels)
        self.conv_t1 = nn.ConvTranspose1d(channels, channels // 2, kernel_size=2 * stride, stride=stride,
                                          padding=math.ceil(stride / 2), output_padding=stride % 2)
        self.res_unit1, self.res_unit2, self.res_unit3 = _residual_units(channels // 2)

    def forward(self, x: PendingSum, *, path: ConvPath) -> PendingSum:
        x = conv_pending(self.conv_t1, self.snake1(x), path=path)
        for unit in (self.res_unit1, self.res_unit2, self.res_unit3):
            x = unit(x, path=path)
        return x


class DacDecoder(nn.Module):
    """(B, acoustic_hidden, T) -> (B, 1, T * hop); unbounded output (no tanh). On CUDA its convolutions run by
    `path`: with ATen's own kernels or with cuDNN (engine/conv.py)."""

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        width = cfg.decoder_hidden_size
        self.conv1 = nn.Conv1d(cfg.acoustic_hidden_size, width, kernel_size=7, padding=3)
        self.block = nn.ModuleList(DacDecoderBlock(width // 2**i, s) for i, s in enumerate(cfg.upsampling_ratios))
        width //= 2 ** len(cfg.upsampling_ratios)
        self.snake1 = Snake(width)
        self.conv2 = nn.Conv1d(width, 1, kernel_size=7, padding=3)

    def forward(self, x: torch.Tensor, *, path: ConvPath = DECODER_CUDNN) -> torch.Tensor:
        pending = conv_pending(self.conv1, x, path=path)
        for block in self.block:
            pending = block(pending, path=path)
        return convolve(self.conv2, self.snake1(pending), bias=self.conv2.bias, path=path)


# ---------------------------------------------------------------------------------------------
# Semantic path: conv encoder over HuBERT features


class SemanticResidualUnit(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int):
        super().__init__()
        self.activation = nn.ELU()
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=(kernel - 1) // 2 * dilation,
                               dilation=dilation, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.activation(self.conv1(self.activation(x))))


class SemanticEncoderBlock(nn.Module):
    def __init__(self, cfg: CodecConfig, channels_in: int, channels_out: int, stride: int):
        super().__init__()
        self.res_units = nn.ModuleList(SemanticResidualUnit(channels_in, cfg.unit_kernel_size, d)
                                       for d in cfg.block_dilations)
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(channels_in, channels_out, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    """(B, semantic_hidden, T) HuBERT features -> (B, semantic_hidden * ratio[-1], T)."""

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        width = cfg.semantic_hidden_size
        self.conv = nn.Conv1d(width, width, cfg.kernel_size, padding=cfg.kernel_size // 2, bias=False)
        widths = [width] + [int(width * r) for r in cfg.channel_ratios]
        self.conv_blocks = nn.ModuleList(SemanticEncoderBlock(cfg, widths[i], widths[i + 1], s)
                                         for i, s in enumerate(cfg.strides))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for block in self.conv_blocks:
            x = block(x)
        return x


# ---------------------------------------------------------------------------------------------
# Residual vector quantisation


class Codebook(nn.Module):
    def __init__(self, size: int, dim: int):
        super().__init__()
        self.register_buffer("embed", torch.zeros(size, dim))  # (K, d)


class VectorQuantizer(nn.Module):
    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.project_in = nn.Linear(cfg.hidden_size, cfg.codebook_dim)
        self.project_out = nn.Linear(cfg.codebook_dim, cfg.hidden_size)
        self.codebook = Codebook(cfg.codebook_size, cfg.codebook_dim)

    def nearest(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T) index of the nearest code (Euclidean) of project_in(x)."""
        z = self.project_in(x)  # (B, T, d)
        flat = z.reshape(-1, z.shape[-1])  # (BT, d)
        codes_t = self.codebook.embed.t()  # (d, K)
        # same expression and layout as transformers: token identity depends on its rounding
        dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ codes_t + codes_t.pow(2).sum(0, keepdim=True)
        return dist.argmin(dim=-1).view(z.shape[:-1])

    def vectors(self, index: torch.Tensor) -> torch.Tensor:
        """(B, T) indices -> (B, T, D) quantised vectors."""
        return self.project_out(F.embedding(index, self.codebook.embed))


class ResidualVectorQuantizer(nn.Module):
    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.quantizers = nn.ModuleList(VectorQuantizer(cfg) for _ in range(cfg.num_quantizers))
        # (Q, K, D): every code's vector, as `vectors` makes it; filled by `tabulate` (`AudioCodec.load` calls it)
        self.register_buffer("code_vectors", None, persistent=False)

    @torch.no_grad()
    def tabulate(self) -> None:
        """Project every code of every codebook once, so that decoding is one gather and one sum.

        The rows equal what `vectors` computes for a batch of codes, except that for batches of
        fewer than ~20 codes the CPU's BLAS rounds some differently (1 ulp).
        """
        self.code_vectors = torch.stack([q.project_out(q.codebook.embed) for q in self.quantizers])

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(Q, T) indices -> (T, D): the sum of their vectors (transformers adds them one codebook at a
        time; on a CPU `sum` adds in that order, on a GPU the order may differ by fp32 rounding)."""
        index = codes[:, :, None].expand(-1, -1, self.code_vectors.shape[-1])  # (Q, T, D)
        return self.code_vectors.gather(1, index).sum(0)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (Q, B, T): each codebook quantises what the previous ones left."""
        codes = []
        for quantizer in self.quantizers:
            index = quantizer.nearest(x)
            x = x - quantizer.vectors(index)
            codes.append(index)
        return torch.stack(codes)


# ---------------------------------------------------------------------------------------------


class AudioCodec(nn.Module):
    """HiggsAudioV2 codec: `encode` a 24 kHz clip to tokens, `decode` tokens to a 24 kHz waveform.

    Build with `AudioCodec.load(folder, device, dtype)`. Module names equal the checkpoint's
    tensor names, so loading is a strict one-to-one copy.
    """

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.cfg = cfg
        self.sample_rate = cfg.sample_rate
        self.frame_rate = cfg.frame_rate
        self.hop_length = cfg.hop_length
        self.num_codebooks = cfg.num_quantizers
        self.codebook_size = cfg.codebook_size
        self.acoustic_encoder = DacEncoder(cfg)
        self.acoustic_decoder = DacDecoder(cfg)
        self.encoder_semantic = SemanticEncoder(cfg)
        self.semantic_model = HubertModel(HubertConfig(**cfg.semantic))
        self.fc = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.fc2 = nn.Linear(cfg.hidden_size, cfg.acoustic_hidden_size)
        self.quantizer = ResidualVectorQuantizer(cfg)
        self.cudnn_choice = CudnnChoice()  # which decodes' convolutions use cuDNN on CUDA (engine/conv.py)

    @classmethod
    def load(cls, folder: str | Path, device: torch.device | str = "cpu",
             dtype: torch.dtype = torch.float32) -> AudioCodec:
        """Read `folder/config.json` and `folder/model.safetensors` (weight norm folded).

        Raises CheckpointError naming the file and tensor when something is missing or wrong.
        """
        folder = Path(folder)
        cfg = _read_config(folder / CONFIG_FILE)
        with torch.device("meta"):
            codec = cls(cfg)
        for module in codec.modules():  # HuBERT's positional conv: weights are folded on load instead
            if parametrize.is_parametrized(module, "weight"):
                parametrize.remove_parametrizations(module, "weight")
        state = _read_weights(folder / WEIGHTS_FILE, codec.state_dict())
        codec.load_state_dict(state, assign=True)
        codec.quantizer.tabulate()  # in float32 on the CPU, whatever the device and dtype asked for
        return codec.to(device=device, dtype=dtype).eval().requires_grad_(False)

    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    @torch.inference_mode()
    def encode(self, wave: torch.Tensor) -> torch.Tensor:
        """24 kHz mono waveform (n,) -> LongTensor (num_codebooks, n // hop).

        Trailing samples short of a whole frame are dropped first, as upstream does.
        """
        frames = wave.shape[-1] // self.hop_length
        if frames == 0:
            raise AudioInputError(f"The clip is too short to encode: it needs at least "
                                  f"{self.hop_length / self.sample_rate * 1000:.0f} ms of audio.")
        x = wave[: frames * self.hop_length].to(self.device, torch.float32)[None, None]  # (1, 1, n)
        semantic = self.encoder_semantic(self._semantic_features(x).transpose(1, 2))  # (1, S, T)
        x = x.to(self.dtype)
        if self.acoustic_encoder.output_length(x.shape[-1]) != semantic.shape[-1]:
            x = F.pad(x, (self.hop_length // 2, self.hop_length // 2))
        acoustic = self.acoustic_encoder(x)  # (1, A, T)
        joint = torch.cat([acoustic, semantic], dim=1)  # (1, D, T)
        joint = self.fc(joint.transpose(1, 2))  # (1, T, D)
        return self.quantizer.encode(joint)[:, 0]  # (Q, T)

    def _semantic_features(self, x: torch.Tensor) -> torch.Tensor:
        """(1, 1, n) float32 at 24 kHz -> (1, T, semantic_hidden): HuBERT's hidden states averaged."""
        x = resample(x, self.cfg.sample_rate, self.cfg.semantic_sample_rate)[:, 0]  # (1, m), in float32
        x = F.pad(x, (HUBERT_PAD, HUBERT_PAD)).to(self.dtype)
        hidden = self.semantic_model(x, output_hidden_states=True).hidden_states  # L+1 x (1, 2T, H)
        return torch.stack(hidden, dim=1).mean(dim=1)[:, :: self.cfg.semantic_stride]

    def conv_path(self, *, pieces: int, frames: int) -> ConvPath:
        """How a decode of `pieces` pieces of `frames` frames convolves on CUDA: with cuDNN (as DECODER_CUDNN says)
        where the CudnnChoice gives it cuDNN, else with ATen's own kernels."""
        return DECODER_CUDNN if self.cudnn_choice(pieces=pieces, frames=frames) else ConvPath.NATIVE

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Tokens (num_codebooks, T) in [0, codebook_size) -> waveform (T * hop,) at 24 kHz.

        Pure device work (no host sync, shapes fixed by T), so it can be captured in a CUDA graph;
        outside a capture, codes out of range raise ValueError. The range is read only once the decode is
        queued (the gather reads the codes clamped into range meanwhile: a GPU's would fault or read junk), so
        a decode queued behind the generation that makes its codes launches while the GPU still generates.
        """
        (wave,), (codes_range,) = self.decode_unchecked([codes])
        self._check_range(codes_range)
        return wave

    @torch.inference_mode()
    def decode_many(self, pieces: list[torch.Tensor]) -> list[torch.Tensor]:
        """Token pieces of one length, each (num_codebooks, T), decoded in one batch: each waveform rounds as well
        as `decode`'s of its piece (the kernels may sum in another order for another batch). Pieces of different
        lengths raise ValueError: padded to the longest, the shorter ones' last frames would change (the decoder
        hears the padding's values instead of zeros there). Codes out of range raise ValueError as in `decode`.
        """
        waves, ranges = self.decode_unchecked(pieces)
        for codes_range in ranges:
            self._check_range(codes_range)
        return waves

    @torch.inference_mode()
    def queue_decode(self, pieces: list[torch.Tensor]) -> QueuedDecode:
        """`decode_many`'s work and the copy of its waveforms (float32) to the host, queued without waiting for the
        device: `QueuedDecode.waves()` waits, then refuses codes out of range as `decode_many` does. A caller
        holding a lock releases it before that wait, and work queued after this call by others (on the same
        stream) does not delay its waves."""
        return self.queue_readback(*self.decode_unchecked(pieces))

    def queue_readback(self, waves: list[torch.Tensor], ranges: list) -> QueuedDecode:
        """The copy to the host of decoded `waves` and of their pieces' code `ranges` (`code_range`), queued behind
        the work that makes them on the waves' device, without waiting for it."""
        pinned = waves[0].is_cuda
        host_waves = [torch.empty(w.shape, dtype=torch.float32, pin_memory=pinned) for w in waves]
        host_ranges = [torch.empty(2, dtype=low.dtype, pin_memory=pinned) for low, _ in ranges]
        for host, wave in zip(host_waves, waves):
            host.copy_(wave, non_blocking=pinned)
        for host, codes_range in zip(host_ranges, ranges):
            host.copy_(torch.stack(codes_range), non_blocking=pinned)
        done = None
        if pinned:  # on the copies' stream: the current stream of the waves' device, not of the thread's current device
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(waves[0].device))
        return QueuedDecode(host_waves, host_ranges, done, self.codebook_size)

    def decode_unchecked(self, pieces: list[torch.Tensor]) -> tuple[list[torch.Tensor], list]:
        """The waveforms of pieces of one length in one batch, the codes clamped into range, and each piece's
        range (`code_range`) not read yet."""
        if len({tuple(codes.shape) for codes in pieces}) != 1:
            raise ValueError(f"pieces decoded together have one length, not {[p.shape[-1] for p in pieces]}")
        ranges = [self.code_range(codes) for codes in pieces]
        latents = [self.fc2(self.quantizer.decode(self._clamped(codes))) for codes in pieces]  # B x (T, A)
        acoustic = latents[0][None] if len(latents) == 1 else torch.stack(latents)  # (B, T, A); one piece: no copy
        path = self.conv_path(pieces=len(pieces), frames=pieces[0].shape[-1])
        waves = list(self.acoustic_decoder(acoustic.transpose(1, 2), path=path)[:, 0])  # B x (T * hop,)
        return waves, ranges

    @torch.inference_mode()
    def warm_up(self) -> None:
        """Where the fused Snake runs: decode one piece of each length of WARM_UP_FRAMES (without cuDNN: no plans
        kept for them), so that Triton compiles, or reads from its cache, every variant of the kernel a decode or an
        encode can need (kernels.snake.variant). Else the first piece of another kind of length pays it, 2.2 s once
        on an H200 in a first audio (BENCHMARKS.md, issue 23), or the first voice made from such a clip. Then one
        small convolution through cuDNN, which loads it for the process."""
        if not use_triton(self.fc2.weight):
            return
        for frames in WARM_UP_FRAMES:
            codes = torch.zeros((self.num_codebooks, frames), dtype=torch.long, device=self.device)
            self.acoustic_decoder(self.fc2(self.quantizer.decode(codes)).t()[None], path=ConvPath.NATIVE)
        # cuDNN loads itself on a process's first convolution through it: 0.25-0.63 s on an H200 that the first decode
        # cuDNN gets would pay (BENCHMARKS.md, issue 23). One small convolution loads it (and keeps one small plan).
        first = next(m for m in self.acoustic_decoder.modules() if isinstance(m, nn.Conv1d))
        convolve(first, torch.zeros((1, first.in_channels, 16), dtype=first.weight.dtype, device=self.device),
                 bias=None, path=DECODER_CUDNN)

    @staticmethod
    def code_range(codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The codes' min and max on their device, not read yet (one reduction); None while a CUDA graph is
        captured."""
        if codes.is_cuda and torch.cuda.is_current_stream_capturing():
            return None
        return torch.aminmax(codes)

    def _clamped(self, codes: torch.Tensor) -> torch.Tensor:
        """The codes within [0, codebook_size): equal to them wherever `_check_range` lets the decode's result out."""
        return codes.clamp(0, self.codebook_size - 1)

    def _check_range(self, codes_range: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        """ValueError if the codes of `code_range` left [0, codebook_size) (reading it waits for the device)."""
        if codes_range is not None:
            check_code_range(*(int(v) for v in codes_range), codebook_size=self.codebook_size)


def check_code_range(low: int, high: int, *, codebook_size: int) -> None:
    """ValueError unless codes from `low` to `high` are all in [0, codebook_size)."""
    if low < 0 or high >= codebook_size:
        raise ValueError(f"codec input out of range: codes {low}..{high}, the codec has 0..{codebook_size - 1}")


@dataclass
class QueuedDecode:
    """Waveforms of `AudioCodec.queue_decode` on their way to the host: their buffers fill when `done` is reached."""

    host_waves: list[torch.Tensor]  # float32, pinned on CUDA
    host_ranges: list[torch.Tensor]  # each piece's (min, max) code
    done: torch.cuda.Event | None  # None: the work ran as it was called (CPU)
    codebook_size: int

    def waves(self) -> list[torch.Tensor]:
        """The float32 waveforms on the host, once the device got there; ValueError if codes were out of range."""
        if self.done is not None:
            self.done.synchronize()
        for low, high in (r.tolist() for r in self.host_ranges):
            check_code_range(low, high, codebook_size=self.codebook_size)
        return self.host_waves


def _read_config(path: Path) -> CodecConfig:
    try:
        return CodecConfig.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise CheckpointError(f"The audio codec config {path} is missing: the checkpoint's "
                              f"audio_tokenizer/ folder is incomplete.") from None
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise CheckpointError(f"The audio codec config {path} cannot be read ({err}).") from None


def _fold_weight_norm(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace weight-norm pairs (g, v), stored as `.weight_g/.weight_v` or as
    `.parametrizations.weight.original0/1`, by the plain `.weight` they stand for."""
    pairs = {".weight_g": ".weight_v", ".parametrizations.weight.original0": ".parametrizations.weight.original1"}
    out = dict(tensors)
    for g_suffix, v_suffix in pairs.items():
        for name in [n for n in tensors if n.endswith(g_suffix)]:
            stem = name[: -len(g_suffix)]
            if stem + v_suffix not in tensors:
                continue  # left unmatched: reported as an unexpected tensor
            g, v = out.pop(name), out.pop(stem + v_suffix)
            kept = [d for d in range(g.dim()) if g.shape[d] != 1]  # the dim the norm is taken per
            out[stem + ".weight"] = torch._weight_norm(v, g, kept[0] if len(kept) == 1 else -1)
    return out


def _read_weights(path: Path, expected: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors `expected` names (with matching shapes) from `path`, as float32."""
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            stored = {name: handle.get_tensor(name) for name in handle.keys() if not UNUSED_TENSORS.match(name)}
    except FileNotFoundError:
        raise CheckpointError(f"The audio codec weights {path} are missing: the checkpoint's "
                              f"audio_tokenizer/ folder is incomplete.") from None
    except (OSError, SafetensorError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"The audio codec weights {path} are corrupt or truncated ({err}). "
                              f"Download the checkpoint again.") from None
    stored = {name: t.float() for name, t in _fold_weight_norm(stored).items()}
    missing = sorted(expected.keys() - stored.keys())
    unexpected = sorted(stored.keys() - expected.keys())
    wrong = [f"{n} {tuple(stored[n].shape)} (expected {tuple(expected[n].shape)})"
             for n in sorted(expected.keys() & stored.keys()) if stored[n].shape != expected[n].shape]
    problems = [f"{label}: {', '.join(items[:5])}{' ...' if len(items) > 5 else ''}"
                for label, items in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong))
                if items]
    if problems:
        raise CheckpointError(f"The audio codec weights {path} do not match its config.json ("
                              f"{'; '.join(problems)}). The folder is from another model or damaged.")
    return stored
