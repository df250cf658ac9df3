"""The check tools/kernels/bench_cublaslt.py holds every cuBLASLt candidate to (so a wrong algorithm is never
chosen): an exactly rounded result passes, a result with a planted fault does not. Runs on the CPU."""
import pytest
import torch

pytest.importorskip("triton")  # the bench's module imports the realtime checks, which time with Triton

from kernels.fp8_ref import quantize_rows_fp8_ref
from kernels.numerics import fp16_rounding_ratio
from tools.kernels import bench_cublaslt


def _fp16_operands(m=37, n=48, k=160):
    g = torch.Generator().manual_seed(0)
    return torch.randn(m, k, generator=g).half(), (torch.randn(n, k, generator=g) / k ** 0.5).half()


def test_an_fp16_gemm_within_rounding_passes_and_a_faulty_one_fails():
    x, w = _fp16_operands()
    ref = bench_cublaslt.reference(x, w)
    good = (x.float() @ w.float().t()).half()  # fp32 sum, one fp16 rounding: what a correct algorithm writes
    assert fp16_rounding_ratio(good, *ref) <= 1
    assert fp16_rounding_ratio((good.float() * 1.01).half(), *ref) > 1  # 1 % off everywhere (a wrong alpha)
    half_k = (x[:, :80].float() @ w[:, :80].float().t()).half()  # a split-K that lost its second slice
    assert fp16_rounding_ratio(half_k, *ref) > 1
    swapped = good.clone()
    swapped[:, [0, 1]] = swapped[:, [1, 0]]  # two output columns exchanged (a wrong layout)
    assert fp16_rounding_ratio(swapped, *ref) > 1
    nan = good.clone()
    nan[5, 7] = float("nan")  # an element never written
    assert not fp16_rounding_ratio(nan, *ref) <= 1


def test_an_fp8_gemm_needs_both_scales():
    x, w = _fp16_operands(k=256)
    codes, scales = quantize_rows_fp8_ref(x)
    wcodes, wscales = quantize_rows_fp8_ref(w)
    ref = bench_cublaslt.reference(codes, wcodes, scales, wscales, acc_bits=23)
    products = codes.double() @ wcodes.double().t()
    good = (products * scales.double()[:, None] * wscales.double()[None, :]).half()
    assert fp16_rounding_ratio(good, *ref) <= 1
    assert fp16_rounding_ratio((products * scales.double()[:, None]).half(), *ref) > 1  # w's scales dropped
    assert fp16_rounding_ratio((products * wscales.double()[None, :]).half(), *ref) > 1  # x's scales dropped
