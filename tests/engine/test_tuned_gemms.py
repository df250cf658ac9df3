"""engine/lm/tuned_gemms.py: which linears take chosen cuBLASLt algorithms, the rule that replaces torch.mm, the
choices file; on a GPU the chosen GEMMs against float64, from the cache, and inside a CUDA graph."""
import json

import pytest
import torch
from torch import nn

from engine.config import ModelConfig
from engine.lm import tuned_gemms
from engine.lm.model import OmniVoiceLM
from kernels import cublaslt
from kernels.numerics import fp16_rounding_ratio

ON_GPU = torch.cuda.is_available()
TINY = ModelConfig(hidden_size=64, intermediate_size=96, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=16,
                   vocab_size=50, audio_vocab_size=9, audio_mask_id=8, num_codebooks=2)


def _tiny_lm(device="cpu") -> OmniVoiceLM:
    torch.manual_seed(0)
    return OmniVoiceLM(TINY).half().to(device)


def _trial(source: str, us: float, correct: bool = True, splitk: int = 1, reduction: int = 0) -> cublaslt.Trial:
    config = cublaslt.AlgoConfig(algo_id=66, tile=len(source), stages=0, splitk=splitk, reduction=reduction,
                                 swizzle=0, custom=0, inner_shape=0, cluster_shape=0)
    return cublaslt.Trial(cublaslt.Candidate(source, config, source.encode(), 0, 1.0), correct, us)


def test_the_four_projections_of_each_block_are_swapped_sharing_their_weights():
    lm = _tiny_lm()
    kept = lm.layers[1].mlp.down_proj = nn.Linear(96, 64, bias=True).half()  # a bias: not ours to run
    weights = {name: p for name, p in lm.named_parameters()}
    x = torch.randn(1, 5, 64).half()
    before = lm.layers[0].attn.qkv_proj(x)
    gemms = tuned_gemms.TunedGemms(torch.device("cpu"))
    swapped = tuned_gemms.use_tuned_gemms(lm, gemms)
    assert len(swapped) == 4 * 3 - 1 and lm.layers[1].mlp.down_proj is kept
    assert type(lm.audio_heads) is nn.Linear
    assert {name: p for name, p in lm.named_parameters()} == weights  # same names, same Parameters
    assert torch.equal(lm.layers[0].attn.qkv_proj(x), before)  # no plan: F.linear
    assert {shape: len(w) for shape, w in gemms.weights.items()} == {(64 + 2 * 32, 64): 3, (64, 64): 3,
                                                                     (192, 64): 3, (64, 96): 2}


def test_torch_mm_stays_unless_a_correct_candidate_beats_it_clearly():
    torch_us = 10.0
    fast, slow = _trial("heuristic 2", 8.0), _trial("heuristic 0", 9.8)
    assert tuned_gemms.decide([slow, fast], torch_us).candidate is fast.candidate
    assert tuned_gemms.decide([slow], torch_us) is None  # within TIE of torch.mm
    assert tuned_gemms.decide([_trial("heuristic 1", 5.0, correct=False)], torch_us) is None
    rounding = _trial("split of heuristic 0", 5.0, splitk=2,
                      reduction=cublaslt.Reduction.CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)
    assert tuned_gemms.decide([rounding, slow], torch_us) is None  # fp16 partial sums are never taken
    fp32_partials = _trial("split of heuristic 0", 5.0, splitk=2,
                           reduction=cublaslt.Reduction.CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)
    assert tuned_gemms.decide([fp32_partials, slow], torch_us).candidate is fp32_partials.candidate


def test_one_choices_file_per_gpu_driver_and_cublaslt_version():
    name = tuned_gemms.cache_name("NVIDIA H200 NVL", 13000, 130100)
    assert name == "gemms-NVIDIA-H200-NVL-driver13000-cublaslt130100.json"
    others = {tuned_gemms.cache_name(*k) for k in [("NVIDIA L4", 13000, 130100), ("NVIDIA H200 NVL", 12080, 130100),
                                                    ("NVIDIA H200 NVL", 13000, 130200)]}
    assert len(others) == 3 and name not in others


def test_off_unless_asked_for_and_never_on_the_cpu(monkeypatch, tmp_path):
    lm = _tiny_lm()
    monkeypatch.delenv(tuned_gemms.ENV, raising=False)
    assert tuned_gemms.tuned_gemms_for(lm, torch.device("cuda"), tmp_path, None) is None
    monkeypatch.setenv(tuned_gemms.ENV, "tuned")
    assert tuned_gemms.tuned_gemms_for(lm, torch.device("cpu"), tmp_path, None) is None
    assert not any(isinstance(m, tuned_gemms.LtLinear) for m in lm.modules())
    monkeypatch.setenv(tuned_gemms.ENV, "fast")
    with pytest.raises(ValueError, match="choose torch or tuned"):
        tuned_gemms.tuned_gemms_for(lm, torch.device("cuda"), tmp_path, None)


def test_an_unreadable_choices_file_is_ignored(tmp_path):
    path = tmp_path / "gemms.json"
    path.write_text("{not json")
    gemms = tuned_gemms.TunedGemms(torch.device("cpu"), path, None)
    assert gemms.choices == {} and gemms.run(torch.zeros(4, 8).half(), torch.zeros(2, 8).half()) is None


# --- on a GPU ------------------------------------------------------------------------------------

needs_cublaslt = pytest.mark.skipif(not (ON_GPU and cublaslt.available()), reason="needs a CUDA GPU and cuBLASLt")


def _prepared(tmp_path, rows: int):
    lm = _tiny_lm("cuda")
    written = []

    def write(path, text):
        written.append(path)
        path.write_text(text)

    gemms = tuned_gemms.TunedGemms(torch.device("cuda"), tmp_path / "gemms.json", write)
    tuned_gemms.use_tuned_gemms(lm, gemms)
    gemms.prepare(rows)
    return lm, gemms, written


@needs_cublaslt
def test_chosen_gemms_match_float64_and_come_back_from_the_file(tmp_path, monkeypatch):
    rows = 136
    lm, gemms, written = _prepared(tmp_path, rows)
    assert written == [tmp_path / "gemms.json"]
    choices = json.loads(written[0].read_text())
    assert set(choices) == {f"{rows}x{n}x{k}" for n, k in gemms.weights}
    x = torch.randn(1, rows, 96, device="cuda").half()
    down = lm.layers[0].mlp.down_proj
    exact = x[0].double() @ down.weight.double().t()
    y = down(x)
    assert y.shape == (1, rows, 64) and fp16_rounding_ratio(y[0], exact.float(), exact.half()) <= 1
    for (m, n, k), (lt, candidate) in gemms.plans.items():  # every chosen one, not only what was timed fastest
        w = gemms.weights[(n, k)][0]
        xs = torch.randn(m, k, device="cuda").half()
        exact = xs.double() @ w.double().t()
        assert fp16_rounding_ratio(gemms.run(xs, w), exact.float(), exact.half()) <= 1, candidate.source

    monkeypatch.setattr(tuned_gemms.TunedGemms, "_measure", lambda *a: pytest.fail("measured again"))
    _, again, written_again = _prepared(tmp_path, rows)
    assert written_again == []
    assert {key: c.algo for key, (_, c) in again.plans.items()} == {key: c.algo for key, (_, c) in gemms.plans.items()}


@needs_cublaslt
def test_a_captured_projection_equals_an_eager_one(tmp_path):
    rows = 264
    lm, gemms, _ = _prepared(tmp_path, rows)
    # Force a cuBLASLt plan for o_proj's shape, whatever was measured, so the captured path is ours.
    n, k = lm.layers[0].attn.o_proj.weight.shape
    lt = cublaslt.LtMatmul(rows, n, k)
    gemms.plans[(rows, n, k)] = (lt, lt.candidates(splits=())[-1])
    o_proj = lm.layers[0].attn.o_proj
    x = torch.randn(1, rows, k, device="cuda").half()
    eager = o_proj(x)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        o_proj(x)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        out = o_proj(x)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
