"""engine.conv: on CUDA each convolution is one call of ATen's `_convolution` with cuDNN and TF32 as its path says
(the process's flags untouched); the codec decoder's go without cuDNN where the codec's CudnnChoice says so, per
call, else with cuDNN as DECODER_CUDNN says; which decodes take cuDNN (per thread, by shape); the encoder's keep
cuDNN in TF32; a CPU computes exactly what the modules do."""
import copy
import threading

import pytest
import torch
from error_budget import assert_as_accurate, float64_codec
from torch import nn

import engine.codec
import engine.conv
from engine.codec import DECODER_CUDNN, AudioCodec
from engine.constants import DEMO_MODEL
from engine.conv import (
    NATIVE_UP_TO_FRAMES,
    PLANS_MS,
    ConvPath,
    CudnnChoice,
    aten_convolution,
    convolve,
    cudnn_warm_decode_ms,
    native_decode_ms,
    natives_before_cudnn,
)

ON_GPU = torch.cuda.is_available()


class LooksCuda(torch.Tensor):
    """A CPU tensor that says it is on CUDA: steers convolve to its CUDA branch on any machine."""

    @property
    def is_cuda(self) -> bool:
        return True


def conv_modules():
    """The decoder's kinds of convolution (dilated, pointwise, transposed with output padding), with and without
    a bias."""
    torch.manual_seed(0)
    return [kind(bias=bias) for bias in (True, False) for kind in (
        lambda bias: nn.Conv1d(6, 6, kernel_size=7, dilation=3, padding=9, bias=bias),
        lambda bias: nn.Conv1d(6, 4, kernel_size=1, bias=bias),
        lambda bias: nn.ConvTranspose1d(6, 3, kernel_size=10, stride=5, padding=3, output_padding=1, bias=bias))]


@pytest.fixture
def aten_calls(monkeypatch):
    """The keyword arguments of every call of ATen's `_convolution` by engine.conv (which it still makes)."""
    calls = []

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return aten_convolution(*args, **kwargs)

    monkeypatch.setattr(engine.conv, "aten_convolution", recorded)
    return calls


# what each path asks ATen for: (cudnn_enabled, allow_tf32)
ASKED = {ConvPath.NATIVE: (False, False), ConvPath.CUDNN_TF32: (True, True), ConvPath.CUDNN_FP32: (True, False)}


@pytest.mark.parametrize("path", list(ConvPath), ids=[p.value for p in ConvPath])
@pytest.mark.parametrize("conv", conv_modules(), ids=[f"{kind}-{bias}" for bias in ("bias", "no bias")
                                                      for kind in ("dilated", "pointwise", "transposed")])
def test_the_cuda_call_computes_what_the_module_does(aten_calls, conv, path):
    """The CUDA branch's call to ATen, with its arguments, run on this machine's tensors: the module's own output
    bit for bit (on a CPU cuDNN's flags change nothing), so stride, padding, dilation, output padding and bias
    are passed as the module has them; and cuDNN and TF32 are asked as the path says."""
    x = torch.randn(2, 6, 23, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = convolve(conv, x.as_subclass(LooksCuda), bias=conv.bias, path=path)
        assert torch.equal(got.as_subclass(torch.Tensor), conv(x))
    assert [(call["cudnn_enabled"], call["allow_tf32"]) for call in aten_calls] == [ASKED[path]]


@pytest.mark.parametrize("settings", [dict(benchmark=True, deterministic=False),
                                      dict(benchmark=False, deterministic=True)], ids=["benchmark", "deterministic"])
def test_the_processs_cudnn_settings_still_hold_but_tf32(aten_calls, settings):
    """Benchmarking and determinism are passed on as the functional call passes them (a process may set them);
    cuDNN switched off for the process stays off on every path; TF32 is the path's alone."""
    conv, x = conv_modules()[0], torch.randn(1, 6, 9).as_subclass(LooksCuda)
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False, **settings):
        convolve(conv, x, bias=conv.bias, path=ConvPath.CUDNN_TF32)
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=False, allow_tf32=True, **settings):
        convolve(conv, x, bias=conv.bias, path=ConvPath.CUDNN_FP32)
    assert [(call["benchmark"], call["deterministic"], call["cudnn_enabled"], call["allow_tf32"])
            for call in aten_calls] == [(settings["benchmark"], settings["deterministic"], True, True),
                                        (settings["benchmark"], settings["deterministic"], False, False)]


@pytest.mark.parametrize("path", list(ConvPath), ids=[p.value for p in ConvPath])
def test_off_cuda_the_functional_call_runs_whatever_the_path(monkeypatch, path):
    monkeypatch.setattr(engine.conv, "aten_convolution", lambda *a, **k: pytest.fail("ATen asked directly"))
    conv = conv_modules()[2]
    x = torch.randn(1, 6, 9)
    with torch.no_grad():
        assert torch.equal(convolve(conv, x, bias=conv.bias, path=path), conv(x))


# -- which decodes take cuDNN ------------------------------------------------------------------------------------

def asked(choice: CudnnChoice, shapes: list[tuple[int, int]]) -> list[bool]:
    return [choice(pieces=pieces, frames=frames) for pieces, frames in shapes]


def test_decodes_up_to_the_limit_never_take_cudnn_however_often():
    """A stream's first piece (and any decode of up to 256 frames in all) never waits for plans, even its tenth
    time: cuDNN's warm gain there is about 1 ms. The limit counts every piece of a batch."""
    choice = CudnnChoice()
    assert NATIVE_UP_TO_FRAMES == 256
    for shape in [(1, 20), (1, 256), (2, 128), (4, 64), (8, 32)]:
        assert asked(choice, [shape] * 10) == [False] * 10, shape


@pytest.mark.parametrize(("shape", "natives"), [((1, 1500), 1), ((1, 1499), 1), ((3, 500), 1), ((1, 1013), 2),
                                               ((4, 250), 3), ((1, 521), 7), ((1, 311), 17), ((1, 257), 26)])
def test_a_longer_shape_goes_with_cudnn_once_its_rent_would_have_paid_for_the_plans(shape, natives):
    """Ski rental, by the H200's figures (BENCHMARKS.md): at 1499 frames cuDNN saves 26 ms a decode warm and its plans
    cost 19 ms more than a decode without it, so the second decode builds them (as the first would not pay back for a
    shape met once); at 311 frames it saves 3 ms against 50 ms of plans: 17 decodes go without it first."""
    choice = CudnnChoice()
    assert asked(choice, [shape] * (natives + 3)) == [False] * natives + [True] * 3


def test_rent_paid_before_the_plans_reaches_their_cost_and_no_more():
    """natives_before_cudnn is the ski rental's count for its cost model: the rent of all but the last decode without
    cuDNN is below the plans' extra cost, and the rent of all of them reaches it. Where the model has the plans cost
    less than a decode without cuDNN (past ~2400 frames, beyond what was measured), the first decode still goes
    without: no decode waits for plans on a guess."""
    for frames in [257, 311, 409, 521, 677, 1000, 1013, 1499, 1500, 2000, 4000]:
        native_ms = native_decode_ms(frames)
        rent_ms, plans_ms = native_ms - cudnn_warm_decode_ms(frames), PLANS_MS - native_ms
        natives = natives_before_cudnn(frames)
        if plans_ms <= 0:
            assert natives == 1, frames
            continue
        assert (natives - 1) * rent_ms < plans_ms, frames
        assert natives * rent_ms >= plans_ms, frames


def test_each_shape_is_new_once_pieces_and_frames_alike():
    """Shapes differ by their number of pieces as by their length (cuDNN's plans are per shape): one seen
    before makes no other one cuDNN's, not even one of the same frames in all."""
    choice = CudnnChoice()
    assert asked(choice, [(1, 1500), (2, 750), (1, 1501), (3, 500), (1, 1500), (2, 750), (1, 1501), (3, 500)]) \
        == [False] * 4 + [True] * 4


def test_a_shape_is_new_to_each_thread():
    """PyTorch keeps cuDNN's plans per thread: another thread's first decode of a shape this one has repeated
    goes without cuDNN too, and its record leaves this thread's as it was."""
    choice = CudnnChoice()
    assert asked(choice, [(1, 1500)] * 2) == [False, True]
    seen = []
    thread = threading.Thread(target=lambda: seen.extend(asked(choice, [(1, 1500), (1, 1500), (1, 1600)])))
    thread.start()
    thread.join()
    assert seen == [False, True, False]
    assert asked(choice, [(1, 1500), (1, 1600)]) == [True, False]


def test_a_copy_remembers_no_shape():
    """float64_codec deep-copies a codec: the copy's decodes are new to every thread, and copying works at all
    (a thread-local record cannot be pickled)."""
    choice = CudnnChoice(native_up_to=10)
    asked(choice, [(1, 1500)])
    twin = copy.deepcopy(choice)
    assert twin.native_up_to == 10
    assert asked(twin, [(1, 1500), (1, 1500)]) == [False, True]


# -- the codec asks it once per decode, and every decoder convolution follows ---------------------------------

@pytest.fixture(scope="module")
def codec():
    return AudioCodec.load(DEMO_MODEL / "audio_tokenizer", "cuda" if ON_GPU else "cpu")


@pytest.fixture
def convolutions(monkeypatch, codec):
    """{conv module: [path asked, per call]} for every call of engine.codec's convolve."""
    calls = {}

    def spy(conv, x, *, bias, path):
        calls.setdefault(conv, []).append(path)
        return convolve(conv, x, bias=bias, path=path)

    monkeypatch.setattr(engine.codec, "convolve", spy)
    return calls


def decoder_convs(codec):
    return [m for m in codec.acoustic_decoder.modules() if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d))]


@pytest.mark.parametrize("answer", [False, True])
def test_every_decoder_conv_follows_the_choice_asked_once_per_decode(monkeypatch, codec, convolutions, answer):
    """Without cuDNN: ATen's own kernels; with it: cuDNN as the codec's DECODER_CUDNN says."""
    path = DECODER_CUDNN if answer else ConvPath.NATIVE
    shapes = []
    monkeypatch.setattr(codec, "cudnn_choice", lambda *, pieces, frames: shapes.append((pieces, frames)) or answer)
    codes = [torch.randint(0, codec.codebook_size, (codec.num_codebooks, 3), device=codec.device) for _ in range(2)]
    codec.decode(codes[0])
    assert shapes == [(1, 3)]
    assert convolutions == {conv: [path] for conv in decoder_convs(codec)}
    convolutions.clear()
    codec.decode_many(codes)
    assert shapes == [(1, 3), (2, 3)]
    assert convolutions == {conv: [path] for conv in decoder_convs(codec)}


def test_the_encoder_keeps_cudnn(monkeypatch, codec, convolutions):
    monkeypatch.setattr(codec, "cudnn_choice", lambda **shape: pytest.fail("the encoder asked"))
    codec.encode(torch.randn(2 * codec.hop_length, generator=torch.Generator().manual_seed(2)))
    encoder = [m for m in codec.acoustic_encoder.modules() if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d))]
    # all but the last, which the encoder calls as a module, as upstream
    assert convolutions == {conv: [ConvPath.CUDNN_TF32] for conv in encoder[:-1]}


@pytest.mark.skipif(not ON_GPU, reason="needs CUDA")
def test_decodes_without_cudnn_and_with_it_in_fp32_are_equally_accurate(monkeypatch, codec):
    """The GPU's decode without cuDNN (cuBLAS's float32 GEMMs) and with cuDNN asked for full float32, against the
    float64 codec: each as accurate as the other, within the codec's rule for two float32 paths (error_budget), with
    the process's TF32 flag on: a TF32 decode is 50-100x farther (BENCHMARKS.md, issue 23)."""
    codes = torch.randint(0, codec.codebook_size, (codec.num_codebooks, 40), device="cuda",
                          generator=torch.Generator("cuda").manual_seed(3))
    waves = {}
    for path in (ConvPath.NATIVE, ConvPath.CUDNN_FP32):
        monkeypatch.setattr(codec, "conv_path", lambda *, pieces, frames: path)
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
            waves[path] = codec.decode(codes)
    exact = float64_codec(codec).decode(codes)
    assert_as_accurate(waves[ConvPath.NATIVE], waves[ConvPath.CUDNN_FP32], exact, factor=2)
    assert_as_accurate(waves[ConvPath.CUDNN_FP32], waves[ConvPath.NATIVE], exact, factor=2)
