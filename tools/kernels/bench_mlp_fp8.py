"""`python -m tools.kernels.bench_mlp_fp8`: Realtime's MLP sublayer on this GPU at 320 and 896 rows, us per call
replayed from a CUDA graph (8 weight sets in turn, tools.kernels.check_realtime_gpu.graph_us). RANDOM weights and
activations.

Chains (per layer, from the post-attention norm to the next layer's input norm, all with FP8 qkv/gate_up as today):
  today: add_rmsnorm_fp8 -> gate_up unit-scale product -> swiglu_scaled (fp16) -> fp16 down -> add_rmsnorm_fp8
  fused: ... -> swiglu_scaled_fp8 (FP8Rows) -> down unit-scale product -> add_rmsnorm_fp8 of the product
  separate quantize: ... -> swiglu_scaled -> quantize_act_fp8 -> down product -> add_rmsnorm_fp8 of the product
SwiGLU + quantizer variants: one program per row with BLOCK 4096 masked to 3072 at num_warps 4/8/16 (the kernel in
kernels/swiglu.py), three 1024 slices kept in registers (num_warps 4/8), two passes over 1024-column blocks
(amax, then recompute and store; num_warps 4/8). Each variant's codes and scales are first checked bit for bit
against swiglu_scaled + quantize_act_fp8.
"""
import torch
import torch.nn.functional as F

from kernels import fp8
from kernels._triton import _INTERPRET, tl, triton
from kernels.fp8 import _E4M3_MAX, _round_to_e4m3
from kernels.rmsnorm import add_rmsnorm_fp8
from kernels.swiglu import _scaled_gate_up, _swiglu_scaled_fp8_kernel, silu_mul, swiglu_scaled
from tools.kernels.check_realtime_gpu import COPIES, graph_us, make_fp8

H, INTER = 1024, 3072


@triton.jit
def _quantized(v, smooth_ptr, cols, mask):
    return tl.math.div_rn(v, tl.load(smooth_ptr + cols, mask=mask, other=1.0))


@triton.jit
def _swiglu_row(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, stride_raw, n_cols, row, cols, mask, DTYPE: tl.constexpr):
    gate, up = _scaled_gate_up(raw_ptr, rs_ptr, cs_ptr, stride_raw, n_cols, row, cols, mask, DTYPE)
    return _quantized(silu_mul(gate, up).to(DTYPE).to(tl.float32), smooth_ptr, cols, mask)


@triton.jit
def _store_codes(xs, safe, codes_ptr, cols, mask):
    v = tl.minimum(tl.maximum(tl.math.div_rn(xs, safe), -_E4M3_MAX), _E4M3_MAX)
    if _INTERPRET:
        v = _round_to_e4m3(v)
    tl.store(codes_ptr + cols, v.to(tl.float8e4nv), mask=mask)


@triton.jit
def _scale_of(amax, scales_ptr):
    scale = tl.math.div_rn(tl.full((1,), 0.0, tl.float32) + amax, tl.full((1,), _E4M3_MAX, tl.float32))
    tl.store(scales_ptr + tl.arange(0, 1), scale)
    return tl.where(scale > 0, scale, 1.0)


@triton.jit
def slices_kernel(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, codes_ptr, scales_ptr, stride_raw, n_cols,
                  DTYPE: tl.constexpr, SLICE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c0 = tl.arange(0, SLICE)
    c1 = c0 + SLICE
    c2 = c1 + SLICE
    m0, m1, m2 = c0 < n_cols, c1 < n_cols, c2 < n_cols
    x0 = _swiglu_row(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, stride_raw, n_cols, row, c0, m0, DTYPE)
    x1 = _swiglu_row(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, stride_raw, n_cols, row, c1, m1, DTYPE)
    x2 = _swiglu_row(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, stride_raw, n_cols, row, c2, m2, DTYPE)
    amax = tl.maximum(tl.maximum(tl.max(tl.abs(x0), axis=0), tl.max(tl.abs(x1), axis=0)), tl.max(tl.abs(x2), axis=0))
    safe = _scale_of(amax, scales_ptr + row)
    codes_row = codes_ptr + row * n_cols
    _store_codes(x0, safe, codes_row, c0, m0)
    _store_codes(x1, safe, codes_row, c1, m1)
    _store_codes(x2, safe, codes_row, c2, m2)


@triton.jit
def two_pass_kernel(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, codes_ptr, scales_ptr, stride_raw, n_cols,
                    DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    amax = tl.zeros((), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        xs = _swiglu_row(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, stride_raw, n_cols, row, cols, mask, DTYPE)
        amax = tl.maximum(amax, tl.max(tl.abs(xs), axis=0))
    safe = _scale_of(amax, scales_ptr + row)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        xs = _swiglu_row(raw_ptr, rs_ptr, cs_ptr, smooth_ptr, stride_raw, n_cols, row, cols, mask, DTYPE)
        _store_codes(xs, safe, codes_ptr + row * n_cols, cols, mask)


def swiglu_fp8_variant(name, p, smooth):
    """FP8Rows of the SwiGLU of product p by variant `name`."""
    m = p.raw.shape[0]
    out = fp8.new_fp8_rows(torch.Size((m, INTER)), p.dtype, p.raw.device)
    args = (p.raw, p.row_scales, p.col_scales, smooth, out.codes, out.scales, p.raw.stride(0), INTER)
    kind, nw = name.rsplit(" nw", 1)
    if kind == "block":
        _swiglu_scaled_fp8_kernel[(m, 1)](*args, DTYPE=tl.float16, BLOCK=4096, num_warps=int(nw),
                                          enable_fp_fusion=False)
    elif kind == "slices":
        slices_kernel[(m,)](*args, DTYPE=tl.float16, SLICE=1024, num_warps=int(nw), enable_fp_fusion=False)
    else:
        two_pass_kernel[(m,)](*args, DTYPE=tl.float16, BLOCK=1024, num_warps=int(nw), enable_fp_fusion=False)
    return out


VARIANTS = ["block nw4", "block nw8", "block nw16", "slices nw4", "slices nw8", "two_pass nw4", "two_pass nw8"]


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    gate_ups = [make_fp8(H, 2 * INTER, seed=c) for c in range(COPIES)]
    downs = [make_fp8(INTER, H, seed=100 + c) for c in range(COPIES)]
    downs16 = [0.02 * torch.randn(H, INTER, device="cuda", generator=gen).half() for _ in range(COPIES)]
    norm_w = (1 + 0.1 * torch.randn(H, device="cuda", generator=gen)).half()
    qkv_smooth = 0.5 + torch.rand(H, device="cuda", generator=gen)
    for m in (320, 896):
        h = torch.randn(m, H, device="cuda", generator=gen).half()
        residual = 4 * torch.randn(m, H, device="cuda", generator=gen).half()
        rows0, _ = add_rmsnorm_fp8(h, residual, norm_w, 1e-6, gate_ups[0].smooth)
        product = fp8.fp8_rows_product(rows0, gate_ups[0].qweight, gate_ups[0].wscales)
        scaled = {"row_scales": product.row_scales, "col_scales": product.col_scales, "out_dtype": torch.float16}
        act16 = swiglu_scaled(product.raw, **scaled)
        act_rows = swiglu_fp8_variant("block nw16", product, downs[0].smooth)
        for name in VARIANTS:  # every variant's codes and scales equal the separate kernels'
            got = swiglu_fp8_variant(name, product, downs[0].smooth)
            codes, scales = fp8.quantize_act_fp8(act16, downs[0].smooth)
            same = torch.equal(got.codes.view(torch.uint8), codes.view(torch.uint8)) and torch.equal(got.scales, scales)
            print(f"M {m}: {name} bit-equal to swiglu_scaled + quantize_act_fp8: {same}")
        down_product = fp8.fp8_rows_product(act_rows, downs[0].qweight, downs[0].wscales)
        t = {}
        t["swiglu_scaled (tiled, fp16 out)"] = graph_us(lambda i: swiglu_scaled(product.raw, **scaled))
        t["quantize_act_fp8 of it"] = graph_us(lambda i: fp8.quantize_act_fp8(act16, downs[i].smooth))
        for name in VARIANTS:
            t[f"swiglu_fp8 {name}"] = graph_us(lambda i, name=name: swiglu_fp8_variant(name, product, downs[i].smooth))
        t["down fp16"] = graph_us(lambda i: F.linear(act16, downs16[i]))
        t["down fp8 unit product"] = graph_us(
            lambda i: fp8.fp8_rows_product(act_rows, downs[i].qweight, downs[i].wscales))
        t["add_rmsnorm_fp8 fp16 x"] = graph_us(lambda i: add_rmsnorm_fp8(h, residual, norm_w, 1e-6, qkv_smooth))
        t["add_rmsnorm_fp8 product x"] = graph_us(
            lambda i: add_rmsnorm_fp8(down_product, residual, norm_w, 1e-6, qkv_smooth))

        def head(i):
            rows, res = add_rmsnorm_fp8(h, residual, norm_w, 1e-6, gate_ups[i].smooth)
            return fp8.fp8_rows_product(rows, gate_ups[i].qweight, gate_ups[i].wscales), res

        def today(i):
            p, res = head(i)
            act = swiglu_scaled(p.raw, row_scales=p.row_scales, col_scales=p.col_scales, out_dtype=p.dtype)
            return add_rmsnorm_fp8(F.linear(act, downs16[i]), res, norm_w, 1e-6, qkv_smooth)

        def fused(i, name="block nw16"):
            p, res = head(i)
            act = swiglu_fp8_variant(name, p, downs[i].smooth)
            return add_rmsnorm_fp8(fp8.fp8_rows_product(act, downs[i].qweight, downs[i].wscales), res, norm_w, 1e-6,
                                   qkv_smooth)

        def separate(i):
            p, res = head(i)
            act = swiglu_scaled(p.raw, row_scales=p.row_scales, col_scales=p.col_scales, out_dtype=p.dtype)
            act = fp8.FP8Rows(*fp8.quantize_act_fp8(act, downs[i].smooth), act.shape, act.dtype)
            return add_rmsnorm_fp8(fp8.fp8_rows_product(act, downs[i].qweight, downs[i].wscales), res, norm_w, 1e-6,
                                   qkv_smooth)

        t["CHAIN today (swiglu_scaled + fp16 down)"] = graph_us(today)
        t["CHAIN separate quantize + fp8 down"] = graph_us(separate)
        for name in VARIANTS:
            t[f"CHAIN fused {name} + fp8 down"] = graph_us(lambda i, name=name: fused(i, name))
        t["CHAIN today again"] = graph_us(today)
        for k, v in t.items():
            print(f"M {m}: {k}: {v:.2f} us", flush=True)


if __name__ == "__main__":
    main()
