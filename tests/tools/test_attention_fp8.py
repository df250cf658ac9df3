"""tools/kernels/attention_fp8.py, the FP8 attention prototype, against float64 references (in Triton's
interpreter without CUDA, at small odd shapes: packed sequences, key blocks cut by the ranges, GQA).

Error analysis (u = 2**-4, e4m3's relative rounding of a normal value; ra = softmax-weighted |v|, i.e. the
float64 attention of the same scores over |v|, per output element):
- quantizer: each element within u |x| of its value, or 2**-10 scales (half e4m3's subnormal step) below 2**-6.
- kernel vs float64 attention of the dequantized operands: only p's e4m3 rounding and the sums differ.
  p's rounding moves sum p v / l by at most u ra; p below 2**-14 of the row's max (subnormal after the 2**8
  shift) by at most 2**-18 each, times max |v|; scores carry the MMA accumulator's truncation (Triton never
  promotes it to fp32), at most 2**-bits sum_d |q_d k_d| / sqrt(D) per step of 32 products (bits:
  `kernels.fp8.accumulator_bits`, 23 in fp32), which moves the weights by a factor within exp(+-2 ds); p.v
  adds one such truncation of ra per 32 keys; fp16 output: one ulp.
- kernel vs float64 attention of the unquantized inputs: the above, plus what the quantization itself does:
  the scores' actual change ds_ij (float64, dequantized minus exact) moves the weights by exp(+-2 max_j ds_ij),
  v's rounding adds u ra.
"""
import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.ragged_attention import ragged_attention_ref
from tools.kernels.attention_fp8 import dequantized, quantize_attention_inputs, ragged_attention_fp8

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
pytest.importorskip("triton")
U = 2.0 ** -4
# FP8 products take 32 keys a step: block_n >= 32; on a GPU the wrapper's tiles (FP8 wgmma needs 64 rows a warpgroup)
SMALL = {} if ON_GPU else dict(block_m=16, num_warps=1, num_stages=1)


def packed_ranges(bounds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    b = torch.tensor(bounds, dtype=torch.int32)
    block = torch.bucketize(torch.arange(bounds[-1], dtype=torch.int32), b[1:], right=True)
    return b[block].to(DEVICE), b[block + 1].to(DEVICE)


def inputs(S, hq, hkv, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple((1.5 * torch.randn(S, h, d, generator=g)).to(DEVICE, torch.float16) for h in (hq, hkv, hkv))


def acc_bits() -> int:
    if not ON_GPU:
        return 23
    from kernels.fp8 import accumulator_bits
    return accumulator_bits(torch.device(DEVICE))


def scores(q, k):
    """[Hq, S, S] float64 natural-log scores q.k / sqrt(D) (GQA: query head h reads KV head h // groups)."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    return torch.einsum("shd,thd->hst", q, k) / math.sqrt(q.shape[2])


def row_max(x, start, end):
    """[Hq, S] max over each row's keys of x [Hq, S, S]."""
    keys = torch.arange(x.shape[-1], device=x.device)
    allowed = (keys >= start[:, None]) & (keys < end[:, None])
    return x.masked_fill(~allowed, 0).amax(-1)


def run(bounds, hq, hkv, d, block_n=32):
    S = bounds[-1]
    q, k, v = inputs(S, hq, hkv, d)
    start, end = packed_ranges(bounds)
    ops = quantize_attention_inputs(q, k, v)
    out = ragged_attention_fp8(ops, start, end, out=torch.full((S, hq, d), float("nan"), dtype=torch.float16,
                                                              device=DEVICE), block_n=block_n, **SMALL)
    assert torch.isfinite(out).all(), "rows left unwritten (still NaN) or not finite"
    return (q, k, v), ops, start, end, out.double()


def quantized_bound(ops, start, end, ref_q):
    """How far the kernel may land from float64 attention of its dequantized operands (module docstring)."""
    qd, kd, vd = dequantized(ops)
    ra = ragged_attention_ref(qd, kd, vd.abs(), start, end)
    steps = math.ceil(qd.shape[2] / 32)  # MMA steps of q.k, each truncating by 2**-bits of the running magnitude
    ds = steps * 2.0 ** -acc_bits() * row_max(scores(qd.abs(), kd.abs()), start, end).t()[..., None]  # [S, Hq, 1]
    n_keys = (end - start).double()[:, None, None]
    vmax = vd.abs().amax()
    return ((U + torch.expm1(2 * ds) + torch.ceil(n_keys / 32) * 2.0 ** -acc_bits()) * ra
            + n_keys * 2.0 ** -18 * vmax + torch.finfo(torch.float16).eps * ref_q.abs())


CASES = [
    ([0, 23, 36, 45], 4, 2, 32),  # prompt, target, pads: tiles of 16 and 32 straddle both inner bounds
    ([0, 70, 101, 112], 4, 2, 32),  # a prompt of several key blocks: unmasked whole blocks, then a cut one
    ([0, 40, 41, 43], 2, 1, 32),  # a prompt over two key blocks, a one-row target
    ([0, 1, 3, 4], 2, 2, 32),  # shorter than one tile, no GQA
]


@pytest.mark.parametrize("bounds,hq,hkv,d", CASES)
def test_quantizer_rounds_each_element_within_e4m3s_step(bounds, hq, hkv, d):
    q, k, v = inputs(bounds[-1], hq, hkv, d)
    for x, xd, scale in zip((q, k, v), dequantized(quantize_attention_inputs(q, k, v)),
                            ("row", "row", "channel")):
        x = x.double()
        amax = x.abs().amax(-1, keepdim=True) if scale == "row" else x.abs().amax(0, keepdim=True)
        allowed = torch.maximum(U * x.abs(), 2.0 ** -10 * amax / 448)
        assert ((xd - x).abs() <= allowed * (1 + 1e-6)).all(), f"{scale}-scaled codes off by more than e4m3's step"


@pytest.mark.parametrize("bounds,hq,hkv,d", CASES)
@pytest.mark.parametrize("block_n", [32, 64])
def test_matches_float64_of_the_quantized_operands(bounds, hq, hkv, d, block_n):
    _, ops, start, end, out = run(bounds, hq, hkv, d, block_n=block_n)
    ref_q = ragged_attention_ref(*dequantized(ops), start, end)
    bound = quantized_bound(ops, start, end, ref_q)
    worst = ((out - ref_q).abs() / bound).max().item()
    assert worst <= 1, f"error {worst:.3g} of the bound"


@pytest.mark.parametrize("bounds,hq,hkv,d", CASES)
def test_matches_float64_attention_of_the_unquantized_inputs(bounds, hq, hkv, d):
    (q, k, v), ops, start, end, out = run(bounds, hq, hkv, d)
    exact = ragged_attention_ref(q.double(), k.double(), v.double(), start, end)
    qd, kd, vd = dequantized(ops)
    ref_q = ragged_attention_ref(qd, kd, vd, start, end)
    ds = row_max((scores(qd, kd) - scores(q.double(), k.double())).abs(), start, end).t()[..., None]
    ra = ragged_attention_ref(q.double(), k.double(), v.double().abs(), start, end)
    bound = quantized_bound(ops, start, end, ref_q) + (torch.expm1(2 * ds) * (1 + U) + U) * ra
    worst = ((out - exact).abs() / bound).max().item()
    assert worst <= 1, f"error {worst:.3g} of the bound"


def test_compiles_for_hopper_with_fp8_wgmma_and_pipelined_v():
    """The interpreter never compiles: build the kernel at its defaults for sm_90 (Triton's compiler and ptxas, no
    GPU) and check both products are FP8 wgmma (QGMMA), v's transposed rows arrive by pipelined copies (no
    byte-wise shared stores through registers, as when key blocks started unaligned) and nothing spills."""
    pytest.importorskip("triton.backends.nvidia.compiler", reason="Triton without its NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "tools.kernels.aot_attention_fp8", "90"], capture_output=True,
                         text=True, env=env, cwd=Path(__file__).parents[2], timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "STACK:0 " in run.stdout and "LOCAL:0 " in run.stdout, run.stdout
    for mma in ("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3",  # q k^T: 64 rows x 64 keys
                "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"):  # p v: 64 rows x head_dim 128
        assert mma in run.stdout, run.stdout
    sass = ast.literal_eval(run.stdout.split("sass: ")[1].splitlines()[0])
    assert sass["QGMMA"] > 0 and sass["STS.U8"] == 0 and sass["STL"] == 0, sass
