"""tools/kernels/cublaslt.py: the choice rule and the "no cuBLASLt" path anywhere; on a GPU every listed candidate
against float64 and a graph-captured call against an eager one. (Struct layouts: test_cublaslt_abi.py.)"""
import pytest
import torch

from kernels import _cuda_libs
from kernels.numerics import fp16_rounding_ratio
from tools.kernels import cublaslt

ON_GPU = torch.cuda.is_available()


def _candidate(source: str) -> cublaslt.Candidate:
    config = cublaslt.AlgoConfig(algo_id=len(source), tile=0, stages=0, splitk=1, reduction=0, swizzle=0, custom=0,
                                 inner_shape=0, cluster_shape=0)
    return cublaslt.Candidate(source, config, algo=source.encode(), workspace=0, waves=1.0)


DEFAULT, SECOND, SPLIT = _candidate("heuristic 0"), _candidate("heuristic 1"), _candidate("split of heuristic 0")


def test_the_fastest_correct_candidate_wins():
    trials = [cublaslt.Trial(DEFAULT, True, 10.0), cublaslt.Trial(SECOND, True, 9.0),
              cublaslt.Trial(SPLIT, True, 8.0)]
    assert cublaslt.choose(trials).candidate == SPLIT


def test_a_failed_check_never_wins():
    trials = [cublaslt.Trial(DEFAULT, True, 10.0), cublaslt.Trial(SPLIT, False, 5.0),
              cublaslt.Trial(SECOND, True, 9.0)]
    assert cublaslt.choose(trials).candidate == SECOND
    assert cublaslt.choose([cublaslt.Trial(SPLIT, False, 5.0)]) is None
    assert cublaslt.choose([cublaslt.Trial(DEFAULT, False, 5.0), cublaslt.Trial(SPLIT, True, 7.0)]).candidate == SPLIT


def test_ties_go_to_the_default():
    just_inside = 10.0 / (1 + cublaslt.TIE) + 1e-6
    trials = [cublaslt.Trial(SECOND, True, just_inside), cublaslt.Trial(DEFAULT, True, 10.0)]
    assert cublaslt.choose(trials).candidate == DEFAULT
    clearly_faster = 10.0 / (1 + cublaslt.TIE) - 0.01
    trials = [cublaslt.Trial(SECOND, True, clearly_faster), cublaslt.Trial(DEFAULT, True, 10.0)]
    assert cublaslt.choose(trials).candidate == SECOND


def test_split_k_reductions_follow_the_mask():
    none = [cublaslt.Reduction.CUBLASLT_REDUCTION_SCHEME_NONE]
    assert cublaslt._reductions(1, mask=0x7) == none
    assert cublaslt._reductions(3, mask=0x6) == [cublaslt.Reduction.CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                                                 cublaslt.Reduction.CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE]
    assert cublaslt._reductions(2, mask=0) == []


def test_the_library_search_starts_with_the_callers_path(monkeypatch):
    monkeypatch.setenv(cublaslt.ENV_VAR, "/opt/mine/libcublasLt.so.13")
    found = _cuda_libs.library_candidates(env_var=cublaslt.ENV_VAR, linux_name="libcublasLt",
                                          windows_pattern="cublasLt64_*.dll")
    assert found[0] == "/opt/mine/libcublasLt.so.13"
    monkeypatch.delenv(cublaslt.ENV_VAR)
    found = _cuda_libs.library_candidates(env_var=cublaslt.ENV_VAR, linux_name="libcublasLt",
                                          windows_pattern="cublasLt64_*.dll")
    assert "/opt/mine/libcublasLt.so.13" not in found


def test_without_cublaslt_it_says_so(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # past the GPU check, to the library's
    monkeypatch.setattr(cublaslt, "library_candidates", lambda **_: ["/nonexistent/libcublasLt.so.13"])
    cublaslt._library.cache_clear()
    try:
        assert not cublaslt.available()
        reason = cublaslt.unavailable_reason()
        assert "cuBLASLt (libcublasLt) was not found" in reason and cublaslt.ENV_VAR in reason
        with pytest.raises(RuntimeError, match="cuBLASLt is not available: cuBLASLt .* was not found"):
            cublaslt.LtMatmul(64, 64, 64, device="cuda")
    finally:
        cublaslt._library.cache_clear()


@pytest.mark.skipif(ON_GPU, reason="the machine has a GPU")
def test_without_a_gpu_it_says_so():
    assert cublaslt.unavailable_reason() == "no CUDA GPU (PyTorch sees none)"
    with pytest.raises(RuntimeError, match="cuBLASLt is not available: no CUDA GPU"):
        cublaslt.LtMatmul(64, 64, 64)


# --- on a GPU ------------------------------------------------------------------------------------

needs_cublaslt = pytest.mark.skipif(not (ON_GPU and cublaslt.available()), reason="needs a CUDA GPU and cuBLASLt")
SHAPES = [(40, 96, 160), (136, 264, 520)]  # M != N != K, neither a multiple of the usual tiles


def _operands(m: int, n: int, k: int):
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    x = torch.randn(m, k, device="cuda", generator=g).half()
    w = (torch.randn(n, k, device="cuda", generator=g) / k ** 0.5).half()
    exact = x.double() @ w.double().t()
    return x, w, exact


@needs_cublaslt
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_every_candidate_matches_float64(m, n, k):
    x, w, exact = _operands(m, n, k)
    lt = cublaslt.LtMatmul(m, n, k)
    candidates = lt.candidates()
    assert candidates[0].is_default and any(c.config.splitk > 1 for c in candidates)
    out = torch.empty(m, n, dtype=torch.float16, device="cuda")
    ratios = {}
    for candidate in candidates:
        out.fill_(float("nan"))
        lt(x, w, candidate, out=out)
        ratios[candidate] = fp16_rounding_ratio(out, exact.float(), exact.half())
    wrong = {f"{c.source} {c.config}": r for c, r in ratios.items() if not r <= 1}
    # Only a split-K that rounds its partial sums to fp16 may miss (the bench reports it, `choose` never takes it).
    assert all(c.config.splitk > 1 and c.config.reduction in cublaslt.ROUNDING_REDUCTIONS
               for c, r in ratios.items() if not r <= 1), wrong


@needs_cublaslt
def test_a_captured_call_equals_an_eager_one():
    m, n, k = SHAPES[1]
    x, w, _ = _operands(m, n, k)
    lt = cublaslt.LtMatmul(m, n, k)
    candidates = lt.candidates()
    # A split-K summing its slices in a workspace in fp32 (deterministic, unlike in-place atomics) and the default.
    splits = [c for c in candidates if c.config.splitk > 1 and c.workspace > 0
              and c.config.reduction == cublaslt.Reduction.CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE]
    for candidate in [candidates[0], *splits[:1]]:
        eager = lt(x, w, candidate)
        out = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            lt(x, w, candidate, out=out)  # warm up outside the capture
        torch.cuda.current_stream().wait_stream(side)
        out.fill_(float("nan"))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            lt(x, w, candidate, out=out)
        assert out.isnan().all()  # captured, not run
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager), candidate.source


@needs_cublaslt
def test_fp8_with_row_scales_matches_float64_where_supported():
    from kernels.fp8 import accumulator_bits
    from kernels.fp8_ref import quantize_rows_fp8_ref
    from tools.kernels.bench_cublaslt import reference

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("no FP8 tensor cores")
    m, n, k = 136, 264, 512
    g = torch.Generator(device="cuda").manual_seed(0)
    x, x_scales = quantize_rows_fp8_ref(torch.randn(m, k, device="cuda", generator=g))
    w, w_scales = quantize_rows_fp8_ref(torch.randn(n, k, device="cuda", generator=g) * torch.rand(n, 1, device="cuda"))
    lt = cublaslt.LtMatmul(m, n, k, dtype=torch.float8_e4m3fn)
    try:
        candidates = lt.heuristic()
    except RuntimeError as e:
        pytest.skip(f"this cuBLASLt has no outer-vector FP8 scaling here: {e}")
    if not candidates:
        pytest.skip("this cuBLASLt has no outer-vector FP8 scaling here")
    y = lt(x, w, candidates[0], x_scales=x_scales, w_scales=w_scales)
    assert fp16_rounding_ratio(y, *reference(x, w, x_scales, w_scales, accumulator_bits(y.device))) <= 1
