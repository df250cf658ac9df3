"""W4A4 (SVDQuant) numerics: the plain-PyTorch contract, the Triton and CUDA kernels against it, the
conversion and the quantized-model files.

Integer group sums must match the reference exactly; outputs within fp16 rounding: the kernel's
distance to the fp32 reference is at most twice the reference's own fp16 rounding error plus one
fp16 ulp of the largest output. Without CUDA the Triton kernels run in the interpreter at small odd
shapes; the CUDA INT4 kernel runs only on a GPU (here only its compilation is checked, when NVRTC is
installed).
"""
import importlib
import os
import sys
from types import SimpleNamespace

import pytest
import torch
from torch import nn

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    # Triton picks the interpreter when a kernel is decorated, so this must come before kernels/ loads.
    os.environ["TRITON_INTERPRET"] = "1"

import kernels._triton  # noqa: E402

if not ON_GPU and kernels._triton.HAS_TRITON and not kernels._triton.INTERPRET:  # imported earlier: redo
    for name in ("kernels._triton", "kernels._launch", "kernels.w4a4_triton"):
        if name in sys.modules:
            importlib.reload(sys.modules[name])

from engine.constants import DEMO_MODEL  # noqa: E402
from engine.errors import CheckpointError, VoiceDeskError  # noqa: E402
from engine.quant import (  # noqa: E402
    QuantConfig,
    W4A4Linear,
    W8A8Linear,
    load_quantized,
    quantize_,
    save_quantized,
)
from kernels import w4a4_cuda  # noqa: E402
from kernels.int8_ref import int8_matmul_ref  # noqa: E402
from kernels.numerics import fp16_rounding_ratio  # noqa: E402
from kernels.w4a4_ref import (  # noqa: E402
    group_sums_ref,
    pack_int4,
    quantize_act_lowrank_ref,
    quantize_act_ref,
    quantize_groups_ref,
    unpack_int4,
    w4a4_linear_ref,
)
from tools.fidelity import sqnr_db  # noqa: E402

DEVICE = "cuda" if ON_GPU else "cpu"
HAS_TRITON = kernels._triton.HAS_TRITON
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="Triton is not installed")


def randn(*shape, scale=1.0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g)).to(device=DEVICE, dtype=dtype)


def random_layer(k, n, rank=32, bias=True, seed=0, dtype=torch.float16):
    """W4A4 buffers with random values of realistic magnitudes (weights as from_linear leaves them)."""
    codes, scales = quantize_groups_ref(randn(n, k, scale=0.05, seed=seed + 1))
    return SimpleNamespace(
        smooth=(0.5 + torch.rand(k, generator=torch.Generator().manual_seed(seed + 2))).to(DEVICE),
        qweight=pack_int4(codes), wscales=scales,
        lora_down=randn(k, rank, scale=0.2, seed=seed + 3, dtype=dtype),
        lora_up=randn(n, rank, scale=0.2, seed=seed + 4, dtype=dtype),
        bias=randn(n, scale=0.5, seed=seed + 5, dtype=dtype) if bias else None)


def assert_within_fp16_rounding(out, ref32, ref16):
    """out misses the fp32 reference by at most twice the reference's own fp16 error + 1 ulp of max."""
    ratio = fp16_rounding_ratio(out, ref32, ref16)
    assert ratio <= 1, f"{ratio:.3g} x the fp16 rounding allowance (max err {(out.float() - ref32).abs().max():.3g})"


# --- the reference numerics ----------------------------------------------------------------------

def test_quantizer_rounds_half_to_even_and_stays_in_range():
    group = torch.zeros(1, 64)
    values = [7.0, 0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 6.5, 5.5, 4.5, -6.5, -7.0]
    group[0, : len(values)] = torch.tensor(values)  # amax 7 -> scale exactly 1
    codes, scales = quantize_groups_ref(group)
    assert scales.tolist() == [[1.0]]
    assert codes[0, : len(values)].tolist() == [7, 0, 2, 2, 4, 0, -2, -2, 6, 6, 4, -6, -7]

    x = torch.randn(33, 256, generator=torch.Generator().manual_seed(0))
    x[:, 5] *= 100  # an outlier channel
    x[3, 64:128] = 0  # an all-zero group
    codes, scales = quantize_groups_ref(x)
    assert codes.dtype == torch.int8 and codes.min() >= -8 and codes.max() <= 7
    grouped = codes.view(33, 4, 64)
    assert (grouped.abs().amax(-1) == 7).sum() == 33 * 4 - 1  # each group's largest value maps to +-7
    assert scales[3, 1] == 0 and (grouped[3, 1] == 0).all()
    torch.testing.assert_close(scales, x.view(33, 4, 64).abs().amax(-1) / 7, rtol=0, atol=0)

    smooth = 0.5 + torch.rand(256, generator=torch.Generator().manual_seed(1))
    got = quantize_act_ref(x.half(), smooth)
    want = quantize_groups_ref(x.half().float() / smooth)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_pack_layout_and_round_trip():
    codes = torch.randint(-8, 8, (5, 192), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    packed = pack_int4(codes)
    assert packed.shape == (5, 96) and packed.dtype == torch.int8
    as_int = packed.to(torch.int32)
    for g in range(3):
        for j in (0, 7, 31):
            byte = as_int[:, g * 32 + j]
            assert torch.equal(((byte << 28) >> 28), codes[:, g * 64 + j].to(torch.int32))  # low nibble
            assert torch.equal(byte >> 4, codes[:, g * 64 + 32 + j].to(torch.int32))  # high nibble
    assert torch.equal(unpack_int4(packed), codes)


def test_group_sums_match_int64_matmul():
    gen = torch.Generator().manual_seed(0)
    qa = torch.randint(-8, 8, (7, 192), dtype=torch.int8, generator=gen)
    qw = torch.randint(-8, 8, (11, 192), dtype=torch.int8, generator=gen)
    qa[0], qw[0] = -8, -8  # the extreme sum 64 * 64
    want = torch.stack([qa[:, g * 64:(g + 1) * 64].long() @ qw[:, g * 64:(g + 1) * 64].long().t()
                        for g in range(3)], dim=-1)
    got = group_sums_ref(qa, qw)
    assert got.dtype == torch.int32 and torch.equal(got.long(), want)
    assert got[0, 0, 0] == 4096


def test_linear_ref_matches_dequantized_fp64():
    layer = random_layer(192, 48, dtype=torch.float32)
    x = randn(5, 192, seed=9)
    xs = x.double() / layer.smooth.double()
    qa, sa = quantize_groups_ref(xs.float())
    qw = unpack_int4(layer.qweight)
    act = (qa.double().view(5, 3, 64) * sa.double()[..., None]).view(5, 192)
    wgt = (qw.double().view(48, 3, 64) * layer.wscales.double()[..., None]).view(48, 192)
    want = act @ wgt.t() + (xs @ layer.lora_down.double()) @ layer.lora_up.double().t() + layer.bias.double()
    got = w4a4_linear_ref(x, layer)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5 * want.abs().max().item())
    residual = randn(5, 48, seed=3)
    torch.testing.assert_close(w4a4_linear_ref(x, layer, residual), got + residual)


# --- Triton kernels against the reference --------------------------------------------------------

@needs_triton
@pytest.mark.parametrize("layout", ["int8", "e4m3"])
@pytest.mark.parametrize("n", [16, 48])
@pytest.mark.parametrize("m,k", [(1, 64), (3, 320), (17, 128)])
def test_triton_matches_ref(m, k, n, layout):
    from kernels.w4a4_triton import quantize_act, w4a4_gemm_debug, weight_codes

    layer = random_layer(k, n, seed=m + k + n)
    x = randn(m, k, seed=m * k, dtype=torch.float16)
    x[:, 1] *= 30  # an outlier channel
    x[-1, 64:] = 0  # an all-zero group when K allows it
    want = quantize_act_lowrank_ref(x, layer.smooth, layer.lora_down, pack=False)
    act = quantize_act(x, layer.smooth, layer.lora_down, layout=layout)
    assert act.codes.shape == (m, k) and torch.equal(act.codes.float(), want.codes.float())
    assert torch.equal(act.scales, want.scales)
    torch.testing.assert_close(act.lowrank, want.lowrank, rtol=2e-3, atol=2e-3 * want.lowrank.abs().max().item())
    packed = quantize_act(x, layer.smooth, layer.lora_down, layout="packed")
    assert torch.equal(packed.codes, pack_int4(want.codes)) and torch.equal(packed.scales, want.scales)

    y, sums = w4a4_gemm_debug(act, weight_codes(layer.qweight, layout), layer.wscales, layer.lora_up, layer.bias)
    assert torch.equal(sums, group_sums_ref(want.codes, unpack_int4(layer.qweight)))
    assert y.dtype == torch.float16
    assert_within_fp16_rounding(y, w4a4_linear_ref(x.float(), layer), w4a4_linear_ref(x, layer))


@needs_triton
def test_triton_epilogue_adds_residual_in_place():
    from kernels.w4a4_triton import quantize_act, w4a4_gemm, weight_codes

    layer = random_layer(128, 48, seed=5)
    x = randn(17, 128, seed=6, dtype=torch.float16)
    residual = randn(17, 48, seed=7, dtype=torch.float16)
    want32, want16 = w4a4_linear_ref(x.float(), layer, residual), w4a4_linear_ref(x, layer, residual)
    act = quantize_act(x, layer.smooth, layer.lora_down)
    y = w4a4_gemm(act, weight_codes(layer.qweight, "int8"), layer.wscales, layer.lora_up, layer.bias, residual,
                  out=residual)
    assert y.data_ptr() == residual.data_ptr()
    assert_within_fp16_rounding(y, want32, want16)
    with pytest.raises(ValueError, match="qweight"):  # packed weights are the CUDA kernel's layout
        w4a4_gemm(act, layer.qweight, layer.wscales, layer.lora_up)
    with pytest.raises(ValueError, match="qweight"):  # the two operands' containers must agree
        w4a4_gemm(act, weight_codes(layer.qweight, "e4m3"), layer.wscales, layer.lora_up)


@needs_triton
def test_module_triton_backend_matches_ref_backend():
    linear = nn.Linear(128, 48).to(DEVICE).half()
    x = randn(3, 5, 128, seed=2, dtype=torch.float16)
    layer = W4A4Linear.from_linear(linear, x.reshape(-1, 128).abs().amax(0), QuantConfig())
    layer.backend = "ref"
    want16 = layer(x)
    want32 = w4a4_linear_ref(x.float(), layer)
    layer.backend = "triton"
    got = layer(x)
    assert got.shape == (3, 5, 48)
    assert_within_fp16_rounding(got, want32, want16)
    layer.qweight[:8] = 0  # the GEMM's unpacked copy of the weights must follow in-place changes
    layer.backend = "ref"
    want16, want32 = layer(x), w4a4_linear_ref(x.float(), layer)
    layer.backend = "triton"
    assert_within_fp16_rounding(layer(x), want32, want16)


# --- CUDA INT4 kernel ----------------------------------------------------------------------------

@pytest.mark.skipif(not w4a4_cuda.nvrtc_available(), reason="NVRTC is not installed (PyTorch CPU build)")
def test_cuda_source_compiles_with_nvrtc(tmp_path):
    written = []
    cache = w4a4_cuda.CubinCache(tmp_path / "kernels",
                                 lambda path, data: written.append(path) or path.write_bytes(data))
    cubins = [w4a4_cuda.compile_cubin(89, rank=32, out_f16=True, tile=tile, cache=cache)
              for tile in (w4a4_cuda.LARGE, w4a4_cuda.SMALL)]
    assert all(c[:4] == b"\x7fELF" for c in cubins) and cubins[0] != cubins[1]
    cached = sorted((tmp_path / "kernels").glob("*.cubin"))
    assert len(cached) == 2 and sorted(written) == cached  # through the caller's writer
    assert w4a4_cuda.compile_cubin(89, cache=cache) == cubins[0]  # the same variant comes from the cache
    assert sorted((tmp_path / "kernels").glob("*.cubin")) == cached and len(written) == 2
    assert w4a4_cuda.compile_cubin(89, tile=w4a4_cuda.SMALL) == cubins[1]  # no cache: compiled, nothing kept
    assert len(written) == 2


def test_the_engine_keeps_cubins_in_its_cache_folder(tmp_path, monkeypatch):
    from engine.quant.linears import cubin_cache

    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))
    cache = cubin_cache()
    assert cache.folder == tmp_path.resolve() / "cache" / "kernels"
    cache.folder.mkdir(parents=True)
    cache.write(cache.folder / "x.cubin", b"abc")
    assert (cache.folder / "x.cubin").read_bytes() == b"abc"
    assert [p.name for p in cache.folder.iterdir()] == ["x.cubin"]  # no temporary file left beside it


@pytest.mark.skipif(not (ON_GPU and w4a4_cuda.nvrtc_available() and torch.cuda.get_device_capability() >= (8, 0)),
                    reason="needs an sm_80+ GPU and NVRTC")
@pytest.mark.parametrize("m,k,n", [(1, 64, 16), (17, 192, 48), (300, 1024, 520)])
def test_cuda_matches_ref(m, k, n):
    from kernels.w4a4_triton import quantize_act

    layer = random_layer(k, n, seed=m)
    x = randn(m, k, seed=m + 1, dtype=torch.float16)
    act = quantize_act(x, layer.smooth, layer.lora_down, layout="packed")
    for tile in (w4a4_cuda.LARGE, w4a4_cuda.SMALL):
        y, sums = w4a4_cuda.w4a4_gemm_cuda_debug(act, layer.qweight, layer.wscales, layer.lora_up, layer.bias,
                                                 tile=tile)
        assert torch.equal(sums, group_sums_ref(unpack_int4(act.codes), unpack_int4(layer.qweight)))
        assert_within_fp16_rounding(y, w4a4_linear_ref(x.float(), layer), w4a4_linear_ref(x, layer))


# --- conversion ----------------------------------------------------------------------------------

def outlier_activations(rows, k, seed):
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(seed))
    x[:, [3, k // 3, k // 2 + 5, k - 7]] *= 40  # a few channels carry outliers, as in LLM activations
    return x


def test_svdquant_beats_plain_rtn_on_outlier_activations():
    torch.manual_seed(0)
    linear = nn.Linear(256, 128)
    nn.init.normal_(linear.weight, std=0.05)
    calibration = outlier_activations(512, 256, seed=1)
    amax = calibration.abs().amax(0)
    x = outlier_activations(256, 256, seed=2)
    want = linear(x)
    svdq = W4A4Linear.from_linear(linear, amax, QuantConfig())
    rtn = W4A4Linear.from_linear(linear, amax, QuantConfig(rank=0, smooth_alpha=None))
    svdq_db, rtn_db = sqnr_db(want, svdq(x)), sqnr_db(want, rtn(x))
    assert svdq_db > rtn_db + 3, (svdq_db, rtn_db)


def test_layer_narrower_than_the_rank():
    linear = nn.Linear(64, 8)
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    layer = W4A4Linear.from_linear(linear, x.abs().amax(0), QuantConfig(rank=16))
    assert layer.lora_up.shape == (8, 16) and (layer.lora_up[:, 8:] == 0).all()
    assert sqnr_db(linear(x), layer(x)) > 25  # rank 8 holds all of W: only activation noise is left


def test_sqnr_db():
    ref = torch.ones(100)
    assert sqnr_db(ref, ref * 1.1) == pytest.approx(20.0)


def test_w8a8_linear_is_accurate_and_exact_in_integers():
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-127, 128, (3, 64), dtype=torch.int8, generator=gen)
    w = torch.randint(-127, 128, (24, 64), dtype=torch.int8, generator=gen)
    assert torch.equal(int8_matmul_ref(a, w).long(), a.long() @ w.long().t())
    linear = nn.Linear(128, 64)
    x = outlier_activations(32, 128, seed=3)
    layer = W8A8Linear.from_linear(linear, x.abs().amax(0), QuantConfig())
    assert sqnr_db(linear(x), layer(x)) > 30


class Tiny(nn.Module):
    """Two blocks with the LM's projection names, plus a head that must stay untouched."""

    def __init__(self, hidden=64, inter=128):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(2):
            block = nn.Module()
            block.attn = nn.Module()
            block.attn.qkv_proj = nn.Linear(hidden, 3 * hidden, bias=False)
            block.attn.o_proj = nn.Linear(hidden, hidden, bias=False)
            block.mlp = nn.Module()
            block.mlp.gate_up_proj = nn.Linear(hidden, 2 * inter, bias=True)
            block.mlp.down_proj = nn.Linear(inter, hidden, bias=False)
            self.layers.append(block)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        for block in self.layers:
            q, k, v = block.attn.qkv_proj(x).chunk(3, dim=-1)
            x = x + block.attn.o_proj(torch.softmax(q @ k.transpose(-1, -2), -1) @ v)
            gate, up = block.mlp.gate_up_proj(x).chunk(2, dim=-1)
            x = x + block.mlp.down_proj(nn.functional.silu(gate) * up)
        return self.head(x)


CFG = QuantConfig(rank=16, w8a8=("*.down_proj",), keep_fp16=("layers.1.attn.o_proj",))


def quantized_tiny(seed=0):
    torch.manual_seed(seed)
    model = Tiny().eval()
    batches = [torch.randn(2, 12, 64, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    plan = quantize_(model, CFG, lambda m: [m(b) for b in batches])
    return model, plan


def test_quantize_swaps_the_named_linears():
    model, plan = quantized_tiny(seed=0)
    assert plan == {"layers.0.attn.qkv_proj": "w4a4", "layers.0.attn.o_proj": "w4a4",
                    "layers.0.mlp.gate_up_proj": "w4a4", "layers.0.mlp.down_proj": "w8a8",
                    "layers.1.attn.qkv_proj": "w4a4", "layers.1.attn.o_proj": "fp16",
                    "layers.1.mlp.gate_up_proj": "w4a4", "layers.1.mlp.down_proj": "w8a8"}
    assert isinstance(model.layers[0].attn.qkv_proj, W4A4Linear)
    assert isinstance(model.layers[0].mlp.down_proj, W8A8Linear)
    assert type(model.layers[1].attn.o_proj) is nn.Linear and type(model.head) is nn.Linear
    assert model.layers[0].mlp.gate_up_proj.bias is not None
    assert all(not m._forward_hooks for m in model.modules())
    torch.manual_seed(0)
    original = Tiny().eval()  # same seed: the weights before conversion
    x = torch.randn(2, 12, 64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert sqnr_db(original(x), model(x)) > 15


def test_quantize_refuses_layers_calibration_never_ran():
    with pytest.raises(VoiceDeskError, match="calibration never ran"):
        quantize_(Tiny(), QuantConfig(rank=16), lambda m: None)


def test_save_load_round_trip_is_bit_exact(tmp_path):
    model, _ = quantized_tiny()
    path = tmp_path / "tiny-w4a4.safetensors"
    save_quantized(model, path, CFG, source_hash="abc123")
    with torch.device("meta"):
        fresh = Tiny()
    cfg = load_quantized(fresh, path, source_hash="abc123")
    assert cfg == CFG
    assert isinstance(fresh.layers[0].attn.qkv_proj, W4A4Linear) and isinstance(fresh.layers[1].mlp.down_proj,
                                                                                  W8A8Linear)
    x = torch.randn(2, 12, 64, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        assert torch.equal(model(x), fresh(x))
    with pytest.raises(CheckpointError, match="other model weights"):
        load_quantized(Tiny(), path, source_hash="other")
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(CheckpointError, match="not a VoiceDesk quantized model"):
        load_quantized(Tiny(), tmp_path / "plain.safetensors")


def test_a_cache_file_with_missing_tensors_is_refused(tmp_path):
    """Never loaded half-filled: a layer without its weights would run on whatever memory it was given."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    model, _ = quantized_tiny()
    path = tmp_path / "tiny-w4a4.safetensors"
    save_quantized(model, path, CFG, source_hash="abc123")
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    dropped = sorted(name for name in tensors if name.startswith("layers.0.attn.qkv_proj"))[0]
    save_file({k: v for k, v in tensors.items() if k != dropped}, str(path), metadata=metadata)
    with torch.device("meta"):
        fresh = Tiny()
    with pytest.raises((CheckpointError, RuntimeError), match=dropped.split(".")[-1]):
        load_quantized(fresh, path, source_hash="abc123")


def test_realtime_conversion_is_cached_per_checkpoint(tmp_path, monkeypatch):
    from engine.lm.checkpoint import load_lm
    from engine.quant import quantization_plan, quantize_for_realtime

    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))  # the one root of every cache
    folder = DEMO_MODEL
    messages = []
    converted, loaded = load_lm(folder), load_lm(folder)
    label = quantize_for_realtime(converted, folder, lambda f, m: messages.append(m))
    assert label == "W4A4 PyTorch reference" and any("calibrating" in m for m in messages)
    assert quantize_for_realtime(loaded, folder, lambda f, m: messages.append(m)) == label
    assert any("loading" in m for m in messages[-2:])
    assert quantization_plan(loaded) == quantization_plan(converted) != {}
    assert len(list((tmp_path / "cache" / "quantized").glob("*.safetensors"))) == 1
    ids = torch.randint(0, 1024, (1, converted.cfg.num_codebooks, 20), generator=torch.Generator().manual_seed(0))
    audio_mask = torch.arange(20)[None] >= 5
    attn_mask = torch.ones(1, 1, 20, 20, dtype=torch.bool)
    with torch.no_grad():
        assert torch.equal(converted(ids, audio_mask, attn_mask), loaded(ids, audio_mask, attn_mask))
