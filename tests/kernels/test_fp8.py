"""W8A8 FP8: the plain-PyTorch contract, the Triton activation quantizer and the `_scaled_mm` path
against it, the conversion, and which backend realtime mode picks.

The quantizer's codes and scales must equal the reference's bit for bit; the linear's output must be
within fp16 rounding of the fp32 reference computed from the same codes. Without CUDA the quantizer
runs in Triton's interpreter (tests/conftest.py) and `torch._scaled_mm` on the CPU.
"""
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from engine.errors import VoiceDeskError
from engine.quant import (
    QuantConfig,
    W8A8FP8Linear,
    backend_label,
    load_quantized,
    quantization_plan,
    quantize_,
    realtime_scheme,
    save_quantized,
)
from kernels import fp8, w4a4_cuda
from kernels._triton import HAS_TRITON
from kernels.fp8_ref import (
    FP8_DTYPE,
    FP8_MAX,
    fp8_output_ratio,
    fp8_sum_and_bound,
    quantize_act_fp8_ref,
    quantize_rows_fp8_ref,
)
from kernels.numerics import ieee_div, ieee_reciprocal
from kernels.rmsnorm import add_rmsnorm, add_rmsnorm_fp8, rmsnorm, rmsnorm_fp8
from kernels.swiglu import swiglu_scaled, swiglu_scaled_fp8
from tools.fidelity import sqnr_db

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="Triton is not installed")
E4M3_GRID = torch.arange(256, dtype=torch.uint8).view(FP8_DTYPE).float()
E4M3_GRID = E4M3_GRID[~E4M3_GRID.isnan()].unique()  # the 253 finite values, sorted (+-0 merged)


def scaled_mm_runs_here() -> bool:
    if ON_GPU:
        return fp8.fp8_supported(torch.device("cuda"))
    try:
        one = torch.ones(16, 16).to(FP8_DTYPE)
        torch._scaled_mm(one, one.t(), scale_a=torch.ones(16, 1), scale_b=torch.ones(1, 16), out_dtype=torch.float16)
        return True
    except (RuntimeError, NotImplementedError):
        return False


needs_scaled_mm = pytest.mark.skipif(not (HAS_TRITON and scaled_mm_runs_here()),
                                     reason="no rowwise torch._scaled_mm here (or no Triton)")


def bits(codes: torch.Tensor) -> torch.Tensor:
    return codes.view(torch.uint8)


def outlier_activations(rows, k, seed, dtype=torch.float32):
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(seed))
    x[:, [3, k // 2 + 5]] *= 40  # a few channels carry outliers, as in LLM activations
    return x.to(device=DEVICE, dtype=dtype)


def smoothing_reciprocals(k: int) -> torch.Tensor:
    """1 / smooth [K] fp32 on DEVICE for random smoothing factors in [0.5, 1.5)."""
    return ieee_reciprocal(0.5 + torch.rand(k, generator=torch.Generator().manual_seed(k))).to(DEVICE)


def divided_codes(x: torch.Tensor, smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The contract before it multiplied: e4m3 codes of (x / smooth) / scale, IEEE divisions, and the scales."""
    xs = x.float() / smooth  # [M, K]
    scales = ieee_div(xs.abs().amax(dim=1), FP8_MAX)  # [M]
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    return (xs / safe[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scales


def division_ties(divisor: float) -> torch.Tensor:
    """fp32 values v near divisor * (an e4m3 rounding midpoint) whose e4m3 code differs between v / divisor
    and v * (1 / divisor) (IEEE, fp32): the ties where a quantizer that still divides parts from the contract."""
    mids = (E4M3_GRID[1:] + E4M3_GRID[:-1]) / 2
    mids = mids[(mids > 2.0 ** -6) & (mids < FP8_MAX)]  # positive normal ones: [m]
    near = (mids * divisor)[:, None].expand(-1, 9).contiguous()  # [m, 9]: each and its 4 fp32 neighbours on each side
    for step in range(1, 5):
        near[:, 4 + step] = near[:, 4 + step - 1].nextafter(torch.tensor(float("inf")))
        near[:, 4 - step] = near[:, 4 - step + 1].nextafter(torch.tensor(0.0))
    near = near.flatten()
    d = torch.full((), divisor)
    differ = (near / d).to(FP8_DTYPE).float() != (near * ieee_reciprocal(d)).to(FP8_DTYPE).float()
    return near[differ]


def tie_rows(divisor: float, width: int = 64) -> torch.Tensor:
    """Rows [R, width] fp32 of `division_ties(divisor)` (both signs), each led by 448 * divisor (scale = divisor)."""
    ties = division_ties(divisor)
    ties = torch.cat([ties, -ties])
    rows = torch.nn.functional.pad(ties, (0, -ties.numel() % (width - 1))).view(-1, width - 1)
    return torch.cat([torch.full((rows.shape[0], 1), FP8_MAX * divisor), rows], dim=1)


def test_reference_quantizer_scales_rounds_and_saturates():
    x = torch.zeros(4, 32)
    x[0, :4] = torch.tensor([448.0, 17.0, 19.0, -2.0 ** -10])  # amax 448 -> scale exactly 1
    x[1] = torch.linspace(-3, 5, 32)
    x[3, :2] = torch.tensor([1e-37, -3e-38])  # scale below fp32's normal range: 1 / scale would be inf
    codes, scales = quantize_rows_fp8_ref(x)  # row 2 is all zeros
    assert codes.dtype == FP8_DTYPE and torch.equal(scales, ieee_div(torch.tensor([448.0, 5.0, 0.0, 1e-37]), FP8_MAX))
    assert codes[0, :4].float().tolist() == [448.0, 16.0, 20.0, 0.0]  # ties to even, below half the smallest
    assert bits(codes[0, 3:4]).item() == 0x80  # ... subnormal: -0, sign kept
    assert codes[1].float().abs().max() == FP8_MAX and (codes[2].float() == 0).all()
    assert (codes[3].float() == 0).all()  # not NaN


def test_reference_codes_are_the_divided_ones_except_at_ties():
    """kernels/fp8_ref.py's analysis: multiplying by 1 / smooth and 1 / scale instead of dividing moves a
    code only where the exact quotient Q lies within 7u |Q| of an e4m3 rounding midpoint (u = 2**-24), and
    then by one e4m3 step; the scales stay within 5u. Random rows with outliers, and rows built at ties."""
    u = 2.0 ** -24
    k = 1024
    smooth = 0.5 + torch.rand(k, generator=torch.Generator().manual_seed(3))
    x = torch.cat([outlier_activations(2048, k, seed=11).cpu(), tie_rows(3.0, width=k)])  # [M, K]
    smooth[:1] = 1.0  # ... the tie rows' scale is 3 (448 * 3 in column 0) and their columns' smoothing 1 ...
    x[2048:, 1:] *= smooth[1:]  # ... so their quotients stay at the ties (1 ulp off at most: still near one)
    codes, scales = quantize_act_fp8_ref(x, ieee_reciprocal(smooth))
    want_codes, want_scales = divided_codes(x, smooth)
    assert ((scales.double() - want_scales.double()).abs() <= 5 * u * want_scales.double()).all()
    grid = E4M3_GRID.double()
    steps = (torch.bucketize(codes.double(), grid) - torch.bucketize(want_codes.double(), grid)).abs()
    assert steps.max() == 1  # some codes move (the tie rows), by one step
    xs = x.double() / smooth.double()
    q = xs / (xs.abs().amax(dim=1, keepdim=True) / FP8_MAX)  # the exact quotient Q [M, K]
    mids = (grid[1:] + grid[:-1]) / 2
    i = torch.bucketize(q, mids).clamp(1, mids.numel() - 1)
    to_mid = torch.minimum((q - mids[i - 1]).abs(), (q - mids[i]).abs())  # [M, K]
    moved = steps > 0
    assert (to_mid[moved] <= 7 * u * q[moved].abs()).all()
    assert moved[:2048].float().mean() < 1e-4  # random rows: ties are rare


@needs_triton
@pytest.mark.parametrize("m,k", [(1, 16), (3, 200), (17, 1024)])
def test_triton_quantizer_is_bit_exact(m, k):
    x = outlier_activations(m, k, seed=m + k, dtype=torch.float16)
    x[-1, : k // 2] = 0
    x[0, 0] = -0.0
    inv_smooth = smoothing_reciprocals(k)
    codes, scales = fp8.quantize_act_fp8(x, inv_smooth)
    want_codes, want_scales = quantize_act_fp8_ref(x, inv_smooth)
    assert torch.equal(bits(codes), bits(want_codes)) and torch.equal(scales, want_scales)
    codes, _ = fp8.quantize_act_fp8(torch.zeros(2, k, dtype=torch.float16, device=DEVICE), inv_smooth)
    assert (bits(codes) == 0).all()


@needs_triton
def test_triton_quantizer_multiplies_where_dividing_would_round_otherwise():
    """Rows whose scale (3) has no exact reciprocal, at the ties where dividing by it gives other codes than
    multiplying by 1 / 3 (a quantizer that still divides fails here), and rows too small for 1 / scale."""
    rows = tie_rows(3.0).to(DEVICE)
    tiny = torch.zeros(2, rows.shape[1], device=DEVICE)
    tiny[0, :3] = torch.tensor([1e-37, -3e-38, 2e-39])  # scale subnormal: codes 0, not NaN
    x = torch.cat([rows, tiny])
    ones = torch.ones(x.shape[1], device=DEVICE)
    codes, scales = fp8.quantize_act_fp8(x, ones)
    want_codes, want_scales = quantize_act_fp8_ref(x, ones)
    assert not torch.equal(bits(want_codes), bits(divided_codes(x, ones)[0]))  # the ties are there
    assert torch.equal(bits(codes), bits(want_codes)) and torch.equal(scales, want_scales)
    assert (codes[-2:].float() == 0).all()


@needs_triton
def test_triton_quantizer_rounds_every_tie_like_torch():
    mids = (E4M3_GRID[1:] + E4M3_GRID[:-1]) / 2
    values = torch.cat([E4M3_GRID, mids, mids.nextafter(mids + 1), mids.nextafter(mids - 1)])
    rows = torch.nn.functional.pad(values, (0, -values.numel() % 63)).view(-1, 63)
    rows = torch.cat([rows, torch.full((rows.shape[0], 1), FP8_MAX)], dim=1).to(DEVICE)  # scale 1 in every row
    codes, scales = fp8.quantize_act_fp8(rows, torch.ones(rows.shape[1], device=DEVICE))
    assert (scales == 1).all()
    assert torch.equal(bits(codes), bits(rows.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)))


def assert_same_rows(rows: fp8.FP8Rows, codes: torch.Tensor, scales: torch.Tensor, shape, dtype):
    """Bit for bit in 16-bit models. In fp32 the fused kernel's norm may end an ulp away from the
    separate kernel's (the compiler can order the row reductions differently; seen on an H200 and in
    no 16-bit case), so there codes may differ by one e4m3 step in a few places."""
    assert rows.shape == torch.Size(shape) and rows.dtype == dtype
    if dtype != torch.float32:
        assert torch.equal(bits(rows.codes), bits(codes)) and torch.equal(rows.scales, scales)
        return
    torch.testing.assert_close(rows.scales, scales, rtol=1e-6, atol=0)
    grid = E4M3_GRID.to(rows.codes.device)
    steps = (torch.bucketize(rows.codes.float(), grid) - torch.bucketize(codes.float(), grid)).abs()
    assert steps.max() <= 1 and (steps > 0).float().mean() <= 0.01


FUSED_SHAPES = [(1, 64), (17, 200), pytest.param(896, 1024, marks=pytest.mark.skipif(not ON_GPU, reason="GPU size"))]


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("m,k", FUSED_SHAPES)
def test_norms_quantize_in_the_same_pass(m, k, dtype):
    """rmsnorm_fp8 / add_rmsnorm_fp8 = the FP8 quantizer applied to rmsnorm / add_rmsnorm's output."""
    x = outlier_activations(m, k, seed=k, dtype=dtype)
    residual = outlier_activations(m, k, seed=k + 1, dtype=dtype)
    weight = (1 + 0.2 * torch.randn(k, generator=torch.Generator().manual_seed(2))).to(DEVICE, dtype)
    inv_smooth = smoothing_reciprocals(k)
    assert_same_rows(rmsnorm_fp8(x, weight, 1e-6, inv_smooth),
                     *fp8.quantize_act_fp8(rmsnorm(x, weight, 1e-6), inv_smooth), (m, k), dtype)
    normed, new_residual = add_rmsnorm(x, residual, weight, 1e-6)
    rows, fused_residual = add_rmsnorm_fp8(x, residual, weight, 1e-6, inv_smooth)
    assert_same_rows(rows, *fp8.quantize_act_fp8(normed, inv_smooth), (m, k), dtype)
    assert torch.equal(fused_residual, new_residual)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("m,k", FUSED_SHAPES)
def test_add_rmsnorm_fp8_applies_the_scales_of_an_fp8_product(m, k, dtype):
    """The sublayer output as an FP8 linear's product before its scales (o_proj's, down_proj's): the same
    FP8Rows and new residual as from its value scaled and rounded to the model dtype beforehand."""
    gen = torch.Generator().manual_seed(k)
    raw = outlier_activations(m, k, seed=k, dtype=torch.bfloat16) * 100  # [m, k] e4m3 sums
    row_scales = (0.5 + torch.rand(m, generator=gen)).to(DEVICE) / 100  # [m]
    col_scales = (0.5 + torch.rand(k, generator=gen)).to(DEVICE)  # [k]
    residual = outlier_activations(m, k, seed=k + 1, dtype=dtype)
    weight = (1 + 0.2 * torch.randn(k, generator=gen)).to(DEVICE, dtype)
    smooth = (0.5 + torch.rand(k, generator=gen)).to(DEVICE)
    product = fp8.FP8Product(raw, row_scales, col_scales, torch.Size((m, k)), dtype)
    value = fp8.scaled_product_ref(raw, row_scales=row_scales, col_scales=col_scales, out_dtype=dtype)
    rows, new_residual = add_rmsnorm_fp8(product, residual, weight, 1e-6, smooth)
    want_rows, want_residual = add_rmsnorm_fp8(value, residual, weight, 1e-6, smooth)
    assert torch.equal(new_residual, want_residual)
    assert_same_rows(rows, want_rows.codes, want_rows.scales, (m, k), dtype)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("m,i", [(1, 64), (5, 1500), pytest.param(896, 3072, marks=pytest.mark.skipif(
    not ON_GPU, reason="GPU size"))])
def test_swiglu_quantizes_in_the_same_pass(m, i, dtype):
    """swiglu_scaled_fp8 = the FP8 quantizer applied to swiglu_scaled's output rounded to the model dtype (the
    fused SwiGLU handing an FP8 down_proj its input): bit for bit, as nothing but the row's amax (exact) sits
    between them. 1500 columns: three slices of 512, the last partly masked."""
    gen = torch.Generator().manual_seed(i)
    raw = outlier_activations(m, 2 * i, seed=i, dtype=torch.bfloat16) * 100  # [m, 2i] e4m3 sums
    row_scales = (0.5 + torch.rand(m, generator=gen)).to(DEVICE) / 100  # [m]
    col_scales = (0.5 + torch.rand(2 * i, generator=gen)).to(DEVICE)  # [2i]
    inv_smooth = smoothing_reciprocals(i)
    raw[-1, :i] = 0  # the last row's gate all zero: SwiGLU's output 0, scale 0, codes 0
    scales = {"row_scales": row_scales, "col_scales": col_scales, "out_dtype": dtype}
    rows = swiglu_scaled_fp8(raw, **scales, inv_smooth=inv_smooth)
    codes, want_scales = fp8.quantize_act_fp8(swiglu_scaled(raw, **scales), inv_smooth)
    assert rows.shape == (m, i) and rows.dtype == dtype
    assert torch.equal(bits(rows.codes), bits(codes)) and torch.equal(rows.scales, want_scales)
    assert want_scales[-1] == 0 and (rows.codes[-1].float() == 0).all()


@needs_scaled_mm
def test_linear_takes_fp8_rows_from_the_kernel_before_it():
    _, layer = fp8_layer(96, 48, seed=4, dtype=torch.float16)
    layer.backend = "scaled_mm"
    x = outlier_activations(2 * 5, 96, seed=5, dtype=torch.float16).view(2, 5, 96)
    assert layer.fp8_input_inv_smooth() is layer.inv_smooth
    rows = fp8.FP8Rows(*fp8.quantize_act_fp8(x.view(10, 96), layer.inv_smooth), x.shape, x.dtype)
    assert torch.equal(layer(rows), layer(x))  # bias included, shape [2, 5, 48]
    layer.backend = "ref"
    assert layer.fp8_input_inv_smooth() is None  # the reference quantizes itself
    _, ranked = fp8_layer(96, 48, rank=16, seed=4, dtype=torch.float16)
    ranked.backend = "scaled_mm"
    assert ranked.fp8_input_inv_smooth() is None  # the low-rank branch needs the activation itself


def fp8_layer(k, n, rank=0, bias=True, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    linear = nn.Linear(k, n, bias=bias).to(DEVICE, dtype)
    calibration = outlier_activations(64, k, seed=seed + 1)
    return linear, W8A8FP8Linear.from_linear(linear, calibration.abs().amax(0), QuantConfig(fp8_rank=rank))


@needs_scaled_mm
def test_linear_returns_its_product_before_the_scales_only_with_nothing_to_add_after_them():
    """With `product_out` (set by the model where the fused SwiGLU follows): the unit-scale product in
    bf16, within what the FP8 sum may lose plus one bf16 rounding of the exact sum of the codes, and
    the two scale vectors; offered only on the `_scaled_mm` backend without a bias or low-rank branch."""
    layers = {name: fp8_layer(96, 48, rank=rank, bias=bias, seed=4, dtype=torch.float16)[1]
              for name, rank, bias in (("plain", 0, False), ("biased", 0, True), ("ranked", 16, False))}
    for layer in layers.values():
        layer.backend = "scaled_mm"
    assert [layer.can_return_product() for layer in layers.values()] == [True, False, False]
    layer = layers["plain"]
    layer.backend = "ref"
    assert not layer.can_return_product()  # the reference computes the scaled output itself
    layer.backend, layer.product_out = "scaled_mm", True
    x = outlier_activations(10, 96, seed=5, dtype=torch.float16).view(2, 5, 96)
    product = layer(x)
    codes, scales = fp8.quantize_act_fp8(x.view(10, 96), layer.inv_smooth)
    assert isinstance(product, fp8.FP8Product) and product.shape == (2, 5, 48) and product.dtype == torch.float16
    assert product.raw.dtype == torch.bfloat16 and product.raw.shape == (10, 48)
    assert torch.equal(product.row_scales, scales) and torch.equal(product.col_scales, layer.wscales)
    exact, bound = fp8_sum_and_bound(codes, layer.qweight, fp8.accumulator_bits(codes.device) if ON_GPU else 23)
    allowed = bound + exact.abs() * torch.finfo(torch.bfloat16).eps / 2  # the sum's loss, then bf16's rounding
    assert ((product.raw.double() - exact).abs() <= allowed).all()


@needs_scaled_mm
@pytest.mark.parametrize("rank", [0, 16])
@pytest.mark.parametrize("m", [1, 17])
def test_scaled_mm_path_matches_ref(m, rank):
    _, layer = fp8_layer(96, 48, rank=rank, seed=m, dtype=torch.float16)
    x = outlier_activations(m, 96, seed=m + 7, dtype=torch.float16).view(1, m, 96)
    layer.backend = "scaled_mm"
    y = layer(x)
    assert y.shape == (1, m, 48) and y.dtype == torch.float16
    assert fp8_output_ratio(y, x, layer, fp8.accumulator_bits(y.device)) <= 1


def test_fp8_linear_is_accurate_with_outliers():
    linear, layer = fp8_layer(128, 64)
    assert layer.lora_down is None and layer.qweight.dtype == FP8_DTYPE
    x = outlier_activations(32, 128, seed=3)
    assert layer.backend_name() in ("ref", "scaled_mm")
    assert sqnr_db(linear(x), layer(x)) > 25
    with pytest.raises(ValueError, match="multiples of 16"):
        W8A8FP8Linear(100, 64, rank=0, bias=False)


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv_proj = nn.Linear(64, 96, bias=False)
        self.down_proj = nn.Linear(96, 40)  # 40 outputs: not FP8-aligned, stays fp16

    def forward(self, x):
        return self.down_proj(torch.relu(self.qkv_proj(x)))


def test_fp8_conversion_plan_and_file_round_trip(tmp_path):
    torch.manual_seed(0)
    model, original = Pair(), Pair()
    original.load_state_dict(model.state_dict())
    batches = [torch.randn(4, 64, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    cfg = QuantConfig(fp8=("*",))
    assert quantize_(model, cfg, lambda m: [m(b) for b in batches]) == {"qkv_proj": "fp8", "down_proj": "fp16"}
    assert backend_label(model) == "W8A8 FP8 PyTorch reference"
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        assert sqnr_db(original(x), model(x)) > 25
    save_quantized(model, tmp_path / "pair.safetensors", cfg, source_hash="h")
    fresh = Pair()
    assert load_quantized(fresh, tmp_path / "pair.safetensors", source_hash="h") == cfg
    assert quantization_plan(fresh) == {"qkv_proj": "fp8"}
    with torch.no_grad():
        assert torch.equal(model(x), fresh(x))


def test_a_conversion_file_holds_smooth_only_and_loading_makes_inv_smooth(tmp_path):
    """Conversion files keep their format (`smooth`, never `inv_smooth`), so the ones saved before the
    quantizers multiplied still load: onto the meta-device model as the engine loads them, the layer gets
    inv_smooth = 1 / smooth, IEEE (fp64's quotient rounded once more is IEEE's for fp32 operands)."""
    torch.manual_seed(0)
    model = Pair()
    cfg = QuantConfig(fp8=("*",))
    quantize_(model, cfg, lambda m: m(torch.randn(4, 64, generator=torch.Generator().manual_seed(0))))
    path = tmp_path / "pair.safetensors"
    save_quantized(model, path, cfg, source_hash="h")
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        assert {key for key in f.keys() if key.startswith("qkv_proj.")} == {
            "qkv_proj.smooth", "qkv_proj.qweight", "qkv_proj.wscales"}  # the format as it always was
    with torch.device("meta"):
        fresh = Pair()
    load_quantized(fresh, path, source_hash="h")
    layer = fresh.qkv_proj
    assert layer.inv_smooth.device.type == "cpu"
    assert torch.equal(layer.inv_smooth, (1 / layer.smooth.double()).float())
    assert torch.equal(model.qkv_proj.inv_smooth, layer.inv_smooth)  # as from_linear made it


@pytest.mark.parametrize("int4_native,fp8_ok,choice,want", [
    (False, True, "auto", "fp8"),  # Hopper, Blackwell (RTX 50): no INT4 tensor cores
    (False, True, "w4a4", "w4a4"),  # forced
    (False, False, "auto", "w4a4"),  # an old PyTorch without rowwise _scaled_mm
    (True, True, "auto", "w4a4"),  # Ada: INT4 tensor cores
    (True, True, "fp8", "fp8"),
    (True, False, "fp8", "w4a4"),  # RTX 30: no FP8 tensor cores
    (True, False, "auto", "w4a4"),
])
def test_realtime_scheme(int4_native, fp8_ok, choice, want):
    assert realtime_scheme(int4_native=int4_native, fp8_ok=fp8_ok, choice=choice) == want


@pytest.mark.parametrize("arch,nvrtc,fp8_ok,want", [
    (90, True, True, "fp8"),  # H100 / H200
    (120, True, True, "fp8"),  # RTX 50: W4A4 would be the Triton int8 emulation
    (100, True, True, "fp8"),  # B200
    (89, True, True, "w4a4"),  # L4, RTX 40
    (89, False, True, "fp8"),  # Ada whose NVRTC is missing: W4A4 would be emulated too
    (86, True, False, "w4a4"),  # RTX 30
])
def test_realtime_config_takes_fp8_where_int4_is_not_native(monkeypatch, arch, nvrtc, fp8_ok, want):
    """The device's facts reach the choice: native INT4 is the W4A4 CUDA kernel's own test (arch and NVRTC)."""
    from engine.quant import realtime

    monkeypatch.setattr(w4a4_cuda, "arch_of", lambda device: arch)
    monkeypatch.setattr(w4a4_cuda, "nvrtc_available", lambda: nvrtc)
    monkeypatch.setattr(w4a4_cuda, "nvrtc", lambda: SimpleNamespace(supported_archs=lambda: [80, 86, 87, 89, 90, 120]))
    monkeypatch.setattr(fp8, "fp8_supported", lambda device: fp8_ok)
    monkeypatch.delenv(realtime.REALTIME_ENV, raising=False)
    cfg = realtime.realtime_config(torch.device("cuda"))
    assert ("fp8" if cfg.fp8 else "w4a4") == want


def test_realtime_config_without_a_gpu_is_w4a4_and_silent(caplog):
    """The CPU runs W4A4's reference; nothing warns that FP8 is missing there."""
    from engine.quant import realtime

    with caplog.at_level("WARNING"):
        assert realtime.realtime_config(torch.device("cpu")) == QuantConfig()
    assert not caplog.records


def test_realtime_fp8_config_quantizes_the_linears_after_a_norm(monkeypatch):
    """qkv_proj and gate_up_proj in FP8 (their inputs come quantized from the fused norms); o_proj and
    down_proj in FP16, where FP8 measured no faster on the H200."""
    from engine.quant import realtime

    monkeypatch.setattr(realtime, "realtime_scheme", lambda **facts: "fp8")
    monkeypatch.setattr(w4a4_cuda, "is_supported", lambda device: False)
    monkeypatch.setattr(fp8, "fp8_supported", lambda device: True)
    cfg = realtime.realtime_config(torch.device("cuda"))
    shapes = {"attn.qkv_proj": (1024, 4096), "attn.o_proj": (2048, 1024), "mlp.gate_up_proj": (1024, 6144),
              "mlp.down_proj": (3072, 1024)}
    plan = {name: cfg.scheme(f"layers.3.{name}", nn.Linear(k, n, device="meta")) for name, (k, n) in shapes.items()}
    assert plan == {"attn.qkv_proj": "fp8", "attn.o_proj": "fp16", "mlp.gate_up_proj": "fp8", "mlp.down_proj": "fp16"}


def test_realtime_scheme_rejects_unknown_choices():
    with pytest.raises(VoiceDeskError, match="VOICEDESK_REALTIME"):
        realtime_scheme(int4_native=False, fp8_ok=True, choice="int4")


@needs_triton
def test_realtime_kernels_compile_for_hopper_with_wgmma():
    """The interpreter never compiles: build the real kernels for sm_90 (Triton's own compiler and
    ptxas, no GPU needed) and check the MMAs are wgmma and nothing spills."""
    pytest.importorskip("triton.backends.nvidia.compiler", reason="Triton without its NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "tools.kernels.aot", "90"], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).parents[2], timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    report = run.stdout
    assert report.count("LOCAL:0 ") == 19, report  # W4A4 in both layouts, the FP8 and int8 kernels, none spilling
    for mma in ("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
                "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8",
                "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",  # the low-rank epilogue
                "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8",  # the int8 GEMM's 64x64 tile
                "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32"):  # ... its 32x64: below wgmma's 64 rows
        assert mma in report, report
