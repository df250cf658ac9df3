"""AudioCodec.warm_up: after it, a decode of any length (one piece or several) and an encode of any clip launch the
fused Snake only in variants Triton has compiled already. Watched on any machine, on the meta device (shapes only) at
the released codec's sizes, whose channels decide which variants there are: the fused path is forced and each launch
is recorded by what Triton compiles per (kernels.snake.variant, checked against Triton's own specialiser where
Triton is installed)."""
import pytest
import torch

import engine.codec
from engine.codec import DECODER_CUDNN, AudioCodec, CodecConfig
from engine.constants import DEMO_MODEL
from engine.conv import ConvPath, convolve
from kernels.snake import snake_input_ref, snake_ref, variant

# the released codec's decoder: 1024 channels halved by each of 5 upsampling blocks, hop 960
RELEASED = CodecConfig(decoder_hidden_size=1024, acoustic_hidden_size=256, upsampling_ratios=(8, 5, 4, 2, 3),
                       downsampling_ratios=(8, 5, 4, 2, 3))
# every length past the tile and parity boundaries of all sites, then spot checks up to a minute of audio
LENGTHS = [*range(1, 300), 511, 512, 513, 1000, 1001, 1500]


@pytest.fixture(scope="module")
def codec():
    with torch.device("meta"):
        codec = AudioCodec(RELEASED)
    codec.quantizer.tabulate()
    return codec.eval()


@pytest.fixture
def launches(monkeypatch):
    """The set of (variant, bias, residual, input_out) of every fused Snake launched (computed as the plain path
    does, on whatever device the input is)."""
    seen = set()

    def recorded(x, alpha, *, bias=None, residual=None, input_out=None):
        seen.add((variant(tuple(x.shape)), bias is None, residual is None, input_out is None))
        h = snake_input_ref(x, bias=bias, residual=residual)
        if input_out is not None:
            input_out.copy_(h)
        return snake_ref(h, alpha)

    monkeypatch.setattr(engine.codec, "use_triton", lambda x: True)
    monkeypatch.setattr(engine.codec, "snake", recorded)
    return seen


def decoded(codec: AudioCodec, pieces: int, frames: int) -> None:
    """The decoder's work for `pieces` pieces of `frames` frames (decode's own range check reads values, which the
    meta device has not)."""
    with torch.inference_mode():
        codec.acoustic_decoder(torch.empty(pieces, RELEASED.acoustic_hidden_size, frames, device="meta"),
                               path=ConvPath.NATIVE)


def encoded(codec: AudioCodec, samples: int) -> None:
    """The acoustic encoder's work (the only part of `encode` with Snakes) for a clip of `samples` samples."""
    with torch.inference_mode():
        codec.acoustic_encoder(torch.empty(1, 1, samples, device="meta"))


def test_variant_tells_apart_what_tritons_specialiser_does():
    """Two shapes have one variant exactly where Triton's own specialiser (of the installed Triton) gives their
    integer arguments one key, by tile."""
    specialise = getattr(pytest.importorskip("triton._C.libtriton"), "native_specialize_impl", None)
    if specialise is None:
        pytest.skip("this Triton specialises in Python")
    from triton.backends.compiler import BaseBackend

    def tritons(shape: tuple[int, int, int]) -> tuple:
        batch, channels, length = shape
        return variant(shape)[0], *(specialise(BaseBackend, n, False, True, True) for n in (batch * channels,
                                                                                            channels, length))

    shapes = [(b, c, n) for b in (1, 2, 3) for c in (1, 16, 17, 512) for n in (1, 2, 16, 17, 32, 255, 300, 1024)]
    for one in shapes:
        for other in shapes:
            assert (variant(one) == variant(other)) == (tritons(one) == tritons(other)), (one, other)


def test_warm_up_compiles_every_variant_a_decode_of_any_length_needs(codec, launches):
    codec.warm_up()
    warmed = set(launches)
    assert len(warmed) > 1
    for pieces in (1, 2, 3):
        for frames in LENGTHS:
            launches.clear()
            decoded(codec, pieces, frames)
            assert launches <= warmed, (pieces, frames, launches - warmed)


def test_warm_up_compiles_every_variant_an_encode_of_any_clip_needs(codec, launches):
    """`encode` gives the encoder whole frames of the clip, or one frame more (half a frame of padding on each side)
    where the semantic branch's length asks for it: a whole number of frames either way."""
    codec.warm_up()
    warmed = set(launches)
    for frames in LENGTHS:
        launches.clear()
        encoded(codec, frames * RELEASED.hop_length)
        assert launches <= warmed, (frames, launches - warmed)


def test_warm_up_decodes_without_cudnn_then_loads_it_once(monkeypatch, codec, launches):
    """Its decodes go without cuDNN (no plans kept for their shapes) and leave the codec's CudnnChoice as it was: a
    user's first piece of a warm-up length is new to the thread like any other. Then one convolution of 16 frames,
    one piece, goes through cuDNN: the process's first, which loads the library."""
    asked = []

    def spy(conv, x, *, bias, path):
        asked.append((path, tuple(x.shape)))
        return convolve(conv, x, bias=bias, path=path)

    monkeypatch.setattr(engine.codec, "convolve", spy)
    monkeypatch.setattr(codec, "cudnn_choice", lambda **shape: pytest.fail("the warm-up asked"))
    codec.warm_up()
    *decodes, (last_path, last_shape) = asked
    assert decodes and {path for path, _ in decodes} == {ConvPath.NATIVE}
    assert last_path == DECODER_CUDNN and last_shape[0] == 1 and last_shape[-1] == 16


def test_warm_up_does_nothing_where_the_plain_path_runs(monkeypatch):
    codec = AudioCodec.load(DEMO_MODEL / "audio_tokenizer")  # on the CPU
    monkeypatch.setattr(engine.codec, "convolve", lambda *a, **k: pytest.fail("decoded on the plain path"))
    codec.warm_up()


def test_the_engine_warms_its_codec_up_when_it_loads(monkeypatch):
    from engine.engine import Engine

    warmed = []
    monkeypatch.setattr(AudioCodec, "warm_up", lambda codec: warmed.append(codec))
    engine = Engine.load(DEMO_MODEL, device="cpu", mode="eager")
    assert warmed == [engine.codec]
