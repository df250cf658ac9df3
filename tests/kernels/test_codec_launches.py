"""engine.codec decode with the fused Snake path (Triton's interpreter on a CPU) and as a number of
device operations, counted with torch.profiler on the CPU: a stand-in for the GPU's kernel launches.

The tiny codec amplifies fp32 rounding about a thousandfold (upstream's own fp32 decode is ~9e-5
from a float64 one), so accuracy is judged as for the kernels: against a float64 decode, at most
twice the error of the plain-PyTorch path plus one fp32 ulp of the largest sample.
"""
from collections import Counter

import pytest
import torch
from error_budget import assert_as_accurate, float64_codec
from test_kernels_fused import DEVICE
from torch.profiler import ProfilerActivity, profile, record_function

import engine.codec
from engine.codec import AudioCodec, Snake
from engine.constants import DEMO_MODEL

pytest.importorskip("triton")
CODEC_DIR = DEMO_MODEL / "audio_tokenizer"
FRAMES = 8  # 7,680 samples: enough for every layer, quick to interpret
KERNEL = "triton::snake"
# ops that launch no kernel on a GPU: views and allocations
NO_KERNEL = {"aten::" + name for name in (
    "view", "_unsafe_view", "as_strided", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand",
    "unsqueeze", "squeeze", "select", "slice", "unbind", "detach", "alias", "empty", "empty_like",
    "empty_strided", "resolve_conj", "resolve_neg", "lift_fresh")}


@pytest.fixture(scope="module")
def codec():
    return AudioCodec.load(CODEC_DIR, DEVICE)


@pytest.fixture(scope="module")
def codes():
    return torch.randint(0, 1024, (8, FRAMES), generator=torch.Generator().manual_seed(0)).to(DEVICE)


def decode(codec, codes, fused: bool):
    """codec.decode on the fused or the plain path, and the device operations it issued, by name."""
    fused_snake = engine.codec.snake

    def marked_snake(*args, **kwargs):  # one launch; in the interpreter, many host-side ops inside
        with record_function(KERNEL):
            return fused_snake(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine.codec, "use_triton", lambda x: fused)
        patch.setattr(engine.codec, "snake", marked_snake)
        if DEVICE == "cuda":
            codec.decode(codes)  # compile, pick cuDNN plans outside the profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out = codec.decode(codes)
    top_level = [e.name for e in prof.events() if e.cpu_parent is None]
    return out, Counter(name for name in top_level
                        if name == KERNEL or name.startswith("aten::") and name not in NO_KERNEL)


@pytest.fixture(scope="module")
def plain(codec, codes):
    return decode(codec, codes, fused=False)


@pytest.fixture(scope="module")
def fused(codec, codes):
    return decode(codec, codes, fused=True)


@pytest.fixture(scope="module")
def codec64(codec):
    return float64_codec(codec)


@pytest.fixture(scope="module")
def exact(codec64, codes):
    return codec64.decode(codes)


def test_fused_decode_is_as_accurate_as_the_plain_one(plain, fused, exact):
    assert fused[0].shape == plain[0].shape == (960 * FRAMES,)
    assert_as_accurate(fused[0], plain[0], exact, factor=2)


@pytest.mark.skipif(DEVICE != "cuda", reason="on a CPU the conv bias is added inside the conv, not after it")
def test_fused_decode_changes_no_bit_on_gpu(plain, fused):
    assert torch.equal(fused[0], plain[0])


def test_short_decodes_as_accurate_as_upstreams_order(codec, codec64):
    """Upstream projects each codebook's codes as they come and adds the 8 vectors one by one; the
    precomputed table agrees except for BLAS rounding at small T, which must stay within the rule."""
    for frames in (1, 7):
        codes = torch.randint(0, 1024, (8, frames), generator=torch.Generator().manual_seed(frames)).to(DEVICE)
        latent = sum(q.vectors(c) for q, c in zip(codec.quantizer.quantizers, codes))  # upstream's order
        upstream = codec.acoustic_decoder(codec.fc2(latent).t()[None])[0, 0]
        assert_as_accurate(codec.decode(codes), upstream, codec64.decode(codes), factor=2)


def test_decode_issues_one_op_per_conv_and_snake(codec, plain, fused):
    """Fused path: each conv, each Snake (its conv bias and residual add folded in), three ops for
    the 8 codebooks and fc2 (gather, sum, linear) and the input range check outside a CUDA-graph
    capture (one aminmax, its two values read, and the clamp that keeps the lookup in range until then);
    nothing else (decode is decode_many's batch path for one piece, which stacks no batch). Before the fusion a
    decode issued
    328 (per Snake 7, per residual unit an add, per codebook an embedding, a linear and an add),
    and the plain path still issues 7 per Snake. A GPU adds cuDNN's own helper kernels to some convs
    and the last conv's bias add."""
    modules = list(codec.acoustic_decoder.modules())
    convs = sum(isinstance(m, (torch.nn.Conv1d, torch.nn.ConvTranspose1d)) for m in modules)
    snakes = sum(isinstance(m, Snake) for m in modules)
    units = sum(isinstance(m, engine.codec.DacResidualUnit) for m in modules)
    counts = fused[1]
    print(f"\ndevice ops per decode: plain path {sum(plain[1].values())}, fused path {sum(counts.values())}")
    assert counts[KERNEL] == snakes == 36
    range_check = 4
    assert sum(counts.values()) <= convs + snakes + 3 + range_check, counts
    assert sum(plain[1].values()) <= convs + 7 * snakes + units + 3 + range_check, plain[1]
