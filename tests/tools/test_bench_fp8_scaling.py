"""tools/kernels/bench_fp8_scaling.py without a GPU: the quantize-to-blocks reference, the scale layouts torch's
checks accept (its meta kernels, on meta tensors), the float64 reference of a block-scaled product, and that a
refused variant is reported while a wrong one fails its check. Operands on the CPU."""
import pytest
import torch

from kernels.fp8_ref import FP8_MAX
from tools.kernels import bench_fp8_scaling as bench


def test_quantize_blocks_scales_are_block_amax_and_codes_decode_within_e4m3_rounding():
    t = torch.randn(256, 384, generator=torch.Generator().manual_seed(0)) * torch.logspace(-3, 2, 384)
    t[128:, 256:] = 0  # one zero block
    codes, scales = bench.quantize_blocks(t, 128, 128)
    assert scales.shape == (2, 3)
    for bi in range(2):
        for bj in range(3):
            block = t[bi * 128:(bi + 1) * 128, bj * 128:(bj + 1) * 128]
            assert scales[bi, bj] == block.abs().max() / torch.tensor(FP8_MAX)
    assert scales[1, 2] == 0 and not codes[128:, 256:].float().any()
    decoded = codes.double() * bench.expand_scales(scales, 128, 128)
    # e4m3: 3 mantissa bits (half an ulp 2**-4 relative), subnormal steps 2**-9 of the scale
    assert ((decoded - t.double()).abs() <= 2.0 ** -4 * t.double().abs()
            + 2.0 ** -10 * bench.expand_scales(scales, 128, 128)).all()
    with pytest.raises(ValueError):
        bench.quantize_blocks(t[:100], 128, 128)


def test_scale_layouts_hold_the_values_in_the_strides_torch_demands():
    m, kb, nb = 320, 16, 8
    act = torch.arange(m * kb, dtype=torch.float32).reshape(m, kb)
    a = bench.act_block_scales(act)
    assert torch.equal(a, act) and a.stride() == (1, m)
    w = torch.arange(nb * kb, dtype=torch.float32).reshape(nb, kb)
    b = bench.weight_block_scales(w)
    assert torch.equal(b, w.t()) and b.stride() == (1, kb)
    rows = torch.arange(nb * 128 * kb, dtype=torch.float32).reshape(nb * 128, kb)
    assert torch.equal(bench.weight_row_block_scales(rows, v2=False), rows.t())
    assert bench.weight_row_block_scales(rows, v2=False).is_contiguous()
    v2 = bench.weight_row_block_scales(rows, v2=True)
    assert torch.equal(v2, rows) and v2.stride() == (1, nb * 128)
    with pytest.raises(ValueError):
        bench.weight_block_scales(torch.ones(8, 6))


@pytest.mark.skipif(not hasattr(torch.nn.functional, "ScalingType"), reason="no torch.nn.functional.scaled_mm here")
@pytest.mark.parametrize(("name", "k", "n"), bench.SHAPES)
def test_torch_meta_checks_accept_the_block_layouts(name, k, n):
    """torch's meta kernel of scaled_mm checks shapes and strides as its CUDA kernel does (ScaledBlas.cpp)."""
    f = torch.nn.functional
    m = 320
    meta = dict(device="meta")
    x = torch.empty(m, k, dtype=torch.float8_e4m3fn, **meta)
    w = torch.empty(n, k, dtype=torch.float8_e4m3fn, **meta)
    sx = bench.act_block_scales(torch.empty(m, k // 128, **meta))
    sw = bench.weight_block_scales(torch.empty(n // 128, k // 128, **meta))
    y = f.scaled_mm(x, w.t(), sx, f.ScalingType.BlockWise1x128, sw, f.ScalingType.BlockWise128x128,
                    output_dtype=torch.float16)
    assert y.shape == (m, n)
    sw_rows = bench.weight_row_block_scales(torch.empty(n, k // 128, **meta), v2=True)
    assert f.scaled_mm(x, w.t(), sx, f.ScalingType.BlockWise1x128, sw_rows, f.ScalingType.BlockWise1x128,
                       output_dtype=torch.float16).shape == (m, n)
    assert torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.float16).shape == (m, n)


@pytest.mark.parametrize("recipe", ["block", "rowblock", "rows"])
def test_exact_is_the_float64_product_of_the_decoded_operands(recipe):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 512, generator=g).half()  # K/128 a multiple of 4, as weight_block_scales needs
    ws = [(0.05 * torch.randn(256, 512, generator=g)).half()]
    ops = bench.quantize(recipe, x, ws)
    if recipe == "rows":  # scales laid out for torch._scaled_mm: [M, 1] and [1, N]
        x64 = ops.x.double() * ops.x_scales.double()
        w64 = ops.ws[0].double() * ops.w_scales[0].double().t()
    else:  # [M, K/128] and [K/128, N/128] or [K/128, N]
        x64 = ops.x.double() * bench.expand_scales(ops.x_scales, 1, 128)
        w_rows = 128 if recipe == "block" else 1
        w64 = ops.ws[0].double() * bench.expand_scales(ops.w_scales[0].t(), w_rows, 128)
    exact, slack = bench.exact_and_slack(ops, acc_bits=13, rows=8, fp8=True)
    want = x64 @ w64.t()
    assert torch.allclose(exact, want, rtol=1e-12, atol=1e-12 * want.abs().max().item())
    assert (slack > 0).all()


def test_refused_variant_is_reported_and_wrong_one_fails_its_check():
    def refuse(ops, i):
        raise RuntimeError("CUDA error: not supported\nsecond line")

    variants = (
        bench.VARIANTS[0],  # fp16 torch.mm: runs on the CPU
        bench.Variant("refused", "block", False, refuse),
        bench.Variant("off by 10%", "fp16", False, lambda ops, i: torch.mm(ops.x, ops.ws[i].t()) * 1.1),
    )
    timed = []
    rows = bench.probe_shape("t", 512, 128, 16, device="cpu", acc_bits=23, variants=variants,
                             timer=lambda fn: (timed.append(fn(1)), 2.0)[1])
    good, refused, wrong = rows
    assert good["ok"] and good["us"] == 2.0 and good["error"] is None and good["check_ratio"] <= 1
    assert refused["us"] is None and not refused["ok"] and refused["error"] == (
        "RuntimeError: CUDA error: not supported | second line")
    assert wrong["check_ratio"] > 1 and not wrong["ok"]
    assert len(timed) == 2


def _emulated_block_gemm(flip_weight_blocks: bool):
    """The block recipe's GEMM in fp32 PyTorch; with flip_weight_blocks the weight scales' K blocks in reverse
    order (a scale-layout mistake)."""
    def call(ops, i):
        w_scales = ops.w_scales[i].t()  # [N/128, K/128]
        w_scales = w_scales.flip(1) if flip_weight_blocks else w_scales
        x = ops.x.float() * bench.expand_scales(ops.x_scales, 1, 128).float()
        w = ops.ws[i].float() * bench.expand_scales(w_scales, 128, 128).float()
        return (x @ w.t()).half()
    return call


def test_block_check_passes_an_fp32_emulation_and_catches_swapped_scale_blocks():
    variants = (bench.Variant("emulated", "block", False, _emulated_block_gemm(flip_weight_blocks=False)),
                bench.Variant("flipped", "block", False, _emulated_block_gemm(flip_weight_blocks=True)))
    good, flipped = bench.probe_shape("t", 512, 256, 16, device="cpu", acc_bits=13, variants=variants,
                                      timer=lambda fn: 1.0)
    assert good["ok"] and good["check_ratio"] <= 1
    assert not flipped["ok"] and flipped["check_ratio"] > 1
