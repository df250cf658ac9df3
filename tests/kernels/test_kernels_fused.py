"""Fused FP16 kernels against their plain-PyTorch references.

Without CUDA the kernels run in the Triton interpreter at small odd shapes; with CUDA the same tests
also run at the model's shapes (Qwen3-0.6B body, OmniVoice's 8 x 1025 audio head). Accuracy rule
(flash-attention's): the kernel's distance to a float64 reference is at most twice PyTorch's own in
the same dtype, plus one ulp of the largest output. In 16-bit dtypes the kernels must also round
where PyTorch rounds, which the accuracy rule alone would not notice (skipping a rounding is *more*
accurate; it flips about a quarter of the last bits): all but 1% of the elements must be
bit-identical to PyTorch's. Outputs are poisoned with NaN / -1 first, so an element the kernel never
writes fails the test.
"""
import pytest
import torch

pytest.importorskip("triton")  # e.g. pip's PyTorch for Windows ships none: the engine then runs the *_ref functions

from kernels import triton_available
from kernels.cfg_score import cfg_score, cfg_score_ref
from kernels.fp8 import FP8Product, scaled_product_ref
from kernels.numerics import ulp_distance
from kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_ref
from kernels.rmsnorm import add_rmsnorm, add_rmsnorm_ref, rmsnorm, rmsnorm_ref
from kernels.swiglu import swiglu, swiglu_ref, swiglu_scaled, swiglu_scaled_ref

ON_GPU = torch.cuda.is_available()  # without CUDA, tests/conftest.py has turned on Triton's interpreter
DEVICE = "cuda" if ON_GPU else "cpu"
EPS = 1e-6
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs CUDA (model-size shapes are too slow to interpret)")
bf16_gpu_only = pytest.mark.skipif(not ON_GPU, reason="the interpreter truncates fp32 -> bf16, GPUs round to nearest")
DTYPES = [torch.float16, torch.float32, pytest.param(torch.bfloat16, marks=bf16_gpu_only)]


def randn(*shape, dtype=torch.float32, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g)).to(device=DEVICE, dtype=dtype)


def norm_weight(n, dtype, seed=1):
    return 1.0 + randn(n, dtype=torch.float32, scale=0.2, seed=seed).to(dtype)


def poisoned(*shape, dtype):
    fill = -1 if dtype == torch.int64 else float("nan")
    return torch.full(shape, fill, dtype=dtype, device=DEVICE)


def assert_matches_torch(out, torch_out, exact_out):
    """out misses exact_out (float64) by at most twice what torch_out does, plus one ulp of the largest
    value; in 16-bit dtypes it also rounds like torch_out (a norm summed in another order may flip
    a few last bits, one rounding done differently flips about a quarter)."""
    assert torch.isfinite(out).all(), "elements left unwritten (still NaN) or not finite"
    exact = exact_out.double()
    kernel_err = (out.double() - exact).abs().max().item()
    torch_err = (torch_out.double() - exact).abs().max().item()
    atol = torch.finfo(out.dtype).eps * exact.abs().max().item()
    assert kernel_err <= 2 * torch_err + atol, f"kernel error {kernel_err:.3g}, torch {torch_err:.3g}, atol {atol:.3g}"
    if out.dtype != torch.float32:
        differing = (ulp_distance(out, torch_out) > 0).sum().item()
        assert differing <= max(1, out.numel() // 100), f"{differing} of {out.numel()} elements round differently"


def with_quiet_rows(x):
    """x with its first row zero and its last (when there are two) far below eps in mean square: rows
    a norm without eps turns into NaN or scales ~10x too much."""
    x = x.clone()
    x[0] = 0
    if x.shape[0] > 1:
        x[-1] = x[-1] * 1e-4  # mean square ~1e-7 (scale 3) against eps 1e-6
    return x


def rope_tables(positions, head_dim, dtype, theta=1_000_000.0):
    """cos/sin [positions, head_dim] computed in fp32 and cast, as transformers builds them."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(positions, dtype=torch.float32)[:, None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(DEVICE, dtype), angles.sin().to(DEVICE, dtype)


def fp8_product(rows, width, seed=0):
    """An FP8 linear's product before its scales: raw bf16 sums ~1e3 (e4m3 products summed), row scales
    and column scales spread over a factor 4 each, so a scale applied on the wrong axis or half shows."""
    raw = randn(rows, width + 16, dtype=torch.float32, scale=1000.0, seed=seed)
    raw = raw.to(torch.bfloat16)[:, :width]  # [rows, width], a row stride past the width
    row_scales = 1e-3 * (0.5 + 1.5 * randn(rows, seed=seed + 1).abs().clamp(max=1))  # [rows]
    col_scales = 0.5 + 1.5 * randn(width, seed=seed + 2).abs().clamp(max=1)  # [width]
    return raw, row_scales, col_scales


def test_triton_available_needs_cuda():
    assert triton_available() == ON_GPU


# ---------------------------------------------------------------- RMSNorm and residual-add + RMSNorm

RMS_SHAPES = [(1, 1000), (3, 1000), (17, 1000), pytest.param(600, 1024, marks=gpu_only),
              pytest.param(1200, 1024, marks=gpu_only)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", RMS_SHAPES)
def test_rmsnorm(rows, hidden, dtype):
    x = with_quiet_rows(randn(rows, hidden + 24, dtype=dtype, scale=3.0))[:, :hidden]  # rows apart, strided
    weight = norm_weight(hidden, dtype)
    y = rmsnorm(x, weight, EPS, out=poisoned(rows, hidden, dtype=dtype))
    assert_matches_torch(y, rmsnorm_ref(x, weight, EPS), rmsnorm_ref(x.double(), weight.double(), EPS))
    assert torch.equal(rmsnorm(x, weight, EPS), y)  # allocating its own output changes nothing


def test_rmsnorm_keeps_leading_dims():
    x, weight = randn(2, 5, 64, dtype=torch.float16), norm_weight(64, torch.float16)
    assert torch.equal(rmsnorm(x, weight, EPS).view(10, 64), rmsnorm(x.view(10, 64), weight, EPS))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", RMS_SHAPES)
def test_add_rmsnorm(rows, hidden, dtype):
    x = with_quiet_rows(randn(rows, hidden, dtype=dtype, seed=2))
    residual = randn(rows, hidden, dtype=dtype, scale=4.0, seed=3)
    residual[0], residual[-1] = 0, 0  # so x + residual keeps x's quiet rows
    weight = norm_weight(hidden, dtype)
    out = (poisoned(rows, hidden, dtype=dtype), poisoned(rows, hidden, dtype=dtype))
    normed, new_residual = add_rmsnorm(x, residual, weight, EPS, out=out)
    torch_normed, torch_residual = add_rmsnorm_ref(x, residual, weight, EPS)
    assert torch.equal(new_residual, torch_residual)  # one rounding of an fp32 sum: must be exact
    exact_normed, _ = add_rmsnorm_ref(x.double(), residual.double(), weight.double(), EPS)
    assert_matches_torch(normed, torch_normed, exact_normed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", RMS_SHAPES)
def test_add_rmsnorm_of_an_fp8_product(rows, hidden, dtype):
    """x an FP8 linear's product before its scales (o_proj's or down_proj's): each element scaled in fp32
    and rounded to the model dtype as torch rounds it, so the new residual equals torch's bit for bit;
    the norm as in test_add_rmsnorm. Row scales also as one scalar expanded over the rows (stride 0)."""
    raw, row_scales, col_scales = fp8_product(rows, hidden, seed=4)
    residual = randn(rows, hidden, dtype=dtype, scale=4.0, seed=3)
    weight = norm_weight(hidden, dtype)
    for rs in (row_scales, row_scales[:1].expand(rows)):
        x = FP8Product(raw, rs, col_scales, torch.Size((rows, hidden)), dtype)
        out = (poisoned(rows, hidden, dtype=dtype), poisoned(rows, hidden, dtype=dtype))
        normed, new_residual = add_rmsnorm(x, residual, weight, EPS, out=out)
        x_value = scaled_product_ref(raw, row_scales=rs, col_scales=col_scales, out_dtype=dtype)
        torch_normed, torch_residual = add_rmsnorm_ref(x_value, residual, weight, EPS)
        assert torch.equal(new_residual, torch_residual)
        exact_normed, _ = add_rmsnorm_ref(x_value.double(), residual.double(), weight.double(), EPS)
        assert_matches_torch(normed, torch_normed, exact_normed)


def test_add_rmsnorm_in_place():
    x, residual = randn(17, 1000, dtype=torch.float16, seed=2), randn(17, 1000, dtype=torch.float16, seed=3)
    weight = norm_weight(1000, torch.float16)
    expected = add_rmsnorm(x, residual, weight, EPS)
    normed, new_residual = add_rmsnorm(x, residual, weight, EPS, out=(x, residual))
    assert normed is x and new_residual is residual
    assert torch.equal(x, expected[0]) and torch.equal(residual, expected[1])


# ---------------------------------------------------------------- q/k norm + RoPE

# rows, q heads, kv heads, head_dim, positions (cos/sin rows; rows // positions sequences)
QK_SHAPES = [(1, 4, 2, 64, 1), (3, 4, 2, 64, 3), (17, 4, 2, 64, 17),
             (6, 3, 1, 24, 3),  # odd head counts, half a head (12) narrower than its block, cos/sin reused
             pytest.param(600, 16, 8, 128, 300, marks=gpu_only), pytest.param(1200, 16, 8, 128, 600, marks=gpu_only)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,n_q,n_kv,head_dim,positions", QK_SHAPES)
def test_qk_norm_rope(rows, n_q, n_kv, head_dim, positions, dtype):
    width = (n_q + 2 * n_kv) * head_dim
    qkv = randn(rows, width + 8, dtype=dtype, scale=3.0)[:, :width]
    q_weight, k_weight = norm_weight(head_dim, dtype, seed=4), norm_weight(head_dim, dtype, seed=5)
    cos, sin = rope_tables(positions, head_dim, dtype)
    out = tuple(poisoned(rows, n, head_dim, dtype=dtype) for n in (n_q, n_kv))
    q, k, v = qk_norm_rope(qkv, q_weight, k_weight, cos, sin, n_q, n_kv, EPS, out=out)
    assert q is out[0] and k is out[1]
    assert v.data_ptr() == qkv[:, (n_q + n_kv) * head_dim:].data_ptr()  # the v heads where they are, not a copy
    torch_q, torch_k, torch_v = qk_norm_rope_ref(qkv, q_weight, k_weight, cos, sin, n_q, n_kv, EPS)
    exact_q, exact_k, _ = qk_norm_rope_ref(qkv.double(), q_weight.double(), k_weight.double(), cos.double(),
                                           sin.double(), n_q, n_kv, EPS)
    assert_matches_torch(q, torch_q, exact_q)
    assert_matches_torch(k, torch_k, exact_k)
    assert torch.equal(v, torch_v)


# ---------------------------------------------------------------- SwiGLU

SWIGLU_SHAPES = [(1, 1500), (3, 1500), (17, 1500),  # two blocks of 1024, the second one partly masked
                 pytest.param(600, 3072, marks=gpu_only), pytest.param(1200, 3072, marks=gpu_only)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,intermediate", SWIGLU_SHAPES)
def test_swiglu(rows, intermediate, dtype):
    gate_up = randn(rows, 2 * intermediate + 16, dtype=dtype, scale=3.0)[:, :2 * intermediate]
    y = swiglu(gate_up, out=poisoned(rows, intermediate, dtype=dtype))
    assert_matches_torch(y, swiglu_ref(gate_up), swiglu_ref(gate_up.double()))


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_swiglu_is_bit_exact_on_gpu(dtype):
    # Same formula, CUDA's expf and a correctly rounded division: nothing left to round differently.
    gate_up = randn(1200, 6144, dtype=dtype, scale=4.0)
    y, expected = swiglu(gate_up), swiglu_ref(gate_up)
    assert torch.equal(y, expected), f"{(y != expected).sum().item()} of {y.numel()} elements differ"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,intermediate", SWIGLU_SHAPES)
def test_swiglu_scaled(rows, intermediate, dtype):
    """The scaled variant against torch on the same bf16 product and scales (an fp64 exact value of
    that function): each scaled element rounded to the model dtype where rowwise `_scaled_mm` rounds it."""
    raw, row_scales, col_scales = fp8_product(rows, 2 * intermediate)
    y = swiglu_scaled(raw, row_scales=row_scales, col_scales=col_scales, out_dtype=dtype,
                      out=poisoned(rows, intermediate, dtype=dtype))
    torch_out = swiglu_scaled_ref(raw, row_scales=row_scales, col_scales=col_scales, out_dtype=dtype)
    exact = swiglu_scaled_ref(raw, row_scales=row_scales.double(), col_scales=col_scales.double(),
                              out_dtype=torch.float64)
    assert_matches_torch(y, torch_out, exact)


# ---------------------------------------------------------------- CFG scoring

CODEBOOKS, CLASSES, MASK_ID, PENALTY = 8, 1025, 1024, 5.0
FRAMES = [1, 3, 17, pytest.param(300, marks=gpu_only), pytest.param(600, marks=gpu_only)]


def head_logits(frames, dtype, seed):
    """cond or uncond logits [C, T, V] as slices of the head's [T, C, V] output: strided, like the engine's."""
    return randn(frames, CODEBOOKS, CLASSES, dtype=dtype, scale=4.0, seed=seed).transpose(0, 1)


@pytest.mark.parametrize("guidance", [0.0, 2.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("frames", FRAMES)
def test_cfg_score(frames, dtype, guidance):
    cond, uncond = head_logits(frames, dtype, seed=6), head_logits(frames, dtype, seed=7)
    out = (poisoned(CODEBOOKS, frames, dtype=torch.int64), poisoned(CODEBOOKS, frames, dtype=torch.float32))
    tokens, scores = cfg_score(cond, uncond, guidance, PENALTY, MASK_ID, out=out)
    expected_tokens, expected_scores = cfg_score_ref(cond, uncond, guidance, PENALTY, MASK_ID)
    assert torch.equal(tokens, expected_tokens)
    assert (scores - expected_scores).abs().max().item() <= 1e-5


@pytest.mark.parametrize("guidance", [0.0, 2.0])
def test_cfg_score_ties_and_mask(guidance):
    # Integer logits: the mask class is the largest and classes 5 and 9 tie behind it, in cond and uncond.
    cond = torch.zeros(CODEBOOKS, 2, CLASSES, device=DEVICE)
    cond[..., MASK_ID], cond[..., 5], cond[..., 9] = 30.0, 20.0, 20.0
    tokens, scores = cfg_score(cond, cond.clone(), guidance, PENALTY, MASK_ID)
    expected_tokens, expected_scores = cfg_score_ref(cond, cond.clone(), guidance, PENALTY, MASK_ID)
    assert (tokens == 5).all() and torch.equal(tokens, expected_tokens)
    assert (scores - expected_scores).abs().max().item() <= 1e-5


def test_cfg_score_without_uncond_when_unguided():
    cond = head_logits(3, torch.float32, seed=6)
    tokens, scores = cfg_score(cond, None, 0.0, PENALTY, MASK_ID)
    expected_tokens, expected_scores = cfg_score_ref(cond, None, 0.0, PENALTY, MASK_ID)
    assert torch.equal(tokens, expected_tokens) and torch.allclose(scores, expected_scores, rtol=0, atol=1e-5)


# ---------------------------------------------------------------- argument checks (no launch)

def _bad_calls():
    h, x = torch.float16, randn(3, 64, dtype=torch.float16)
    w = norm_weight(64, h)
    qkv, qk_w = randn(3, 4 * 16, dtype=h), norm_weight(16, h)
    cos, sin = rope_tables(3, 16, h)
    logits = randn(8, 3, 1025)

    def product():
        return FP8Product(x.bfloat16(), x[:, 0].float(), x[0].float(), x.shape, h)

    return {
        "weight dtype": lambda: rmsnorm(x, w.float(), EPS),
        "weight size": lambda: rmsnorm(x, w[:32], EPS),
        "strided last dim": lambda: rmsnorm(randn(3, 128, dtype=h)[:, ::2], w, EPS),
        "int input": lambda: rmsnorm(x.to(torch.int32), w, EPS),
        "residual shape": lambda: add_rmsnorm(x, x[:2], w, EPS),
        "out dtype": lambda: rmsnorm(x, w, EPS, out=torch.empty(3, 64, device=DEVICE)),
        "residual out shape": lambda: add_rmsnorm(x, x, w, EPS, out=(x.clone(), x[:2].clone())),
        "product without a residual": lambda: rmsnorm(product(), w, EPS),
        "product raw dtype": lambda: add_rmsnorm(product()._replace(raw=x), x, w, EPS),
        "product row scales size": lambda: add_rmsnorm(product()._replace(row_scales=x[:2, 0].float()), x, w, EPS),
        "product dtype": lambda: add_rmsnorm(product()._replace(dtype=torch.float32), x, w, EPS),
        "qkv width": lambda: qk_norm_rope(qkv, qk_w, qk_w, cos, sin, 2, 2, EPS),
        "odd head_dim": lambda: qk_norm_rope(randn(3, 60, dtype=h), qk_w[:15], qk_w[:15], cos, sin, 2, 1, EPS),
        "positions do not tile rows": lambda: qk_norm_rope(qkv, qk_w, qk_w, cos[:2], sin[:2], 2, 1, EPS),
        "cos dtype": lambda: qk_norm_rope(qkv, qk_w, qk_w, cos.float(), sin, 2, 1, EPS),
        "q out shape": lambda: qk_norm_rope(qkv, qk_w, qk_w, cos, sin, 2, 1, EPS,
                                           out=(torch.empty(3, 1, 16, dtype=h, device=DEVICE),) * 2),
        "odd gate_up": lambda: swiglu(randn(3, 63, dtype=h)),
        "swiglu out shape": lambda: swiglu(x, out=torch.empty(3, 64, dtype=h, device=DEVICE)),
        "scaled raw dtype": lambda: swiglu_scaled(x, row_scales=x[:, 0].float(), col_scales=x[0].float(),
                                                  out_dtype=h),
        "scaled col_scales size": lambda: swiglu_scaled(x.bfloat16(), row_scales=x[:, 0].float(),
                                                        col_scales=x[0, :32].float(), out_dtype=h),
        "uncond missing": lambda: cfg_score(logits, None, 2.0, PENALTY, MASK_ID),
        "uncond shape": lambda: cfg_score(logits, logits[:, :2], 2.0, PENALTY, MASK_ID),
        "mask id": lambda: cfg_score(logits, logits, 2.0, PENALTY, 1025),
        "tokens out dtype": lambda: cfg_score(logits, logits, 2.0, PENALTY, MASK_ID,
                                              out=(torch.empty(8, 3, device=DEVICE),) * 2),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_wrappers_reject_bad_arguments(case):
    with pytest.raises(ValueError):
        _bad_calls()[case]()


@gpu_only
def test_wrappers_reject_tensors_on_two_devices():
    x = randn(3, 64, dtype=torch.float16)
    with pytest.raises(ValueError):
        rmsnorm(x, norm_weight(64, torch.float16).cpu(), EPS)


# ---------------------------------------------------------------- CUDA graphs

@gpu_only
def test_out_buffers_replay_in_a_cuda_graph():
    """Every wrapper captured with static out= buffers replays new inputs exactly like an eager call."""
    h, rows, n_q, n_kv, d = torch.float16, 600, 16, 8, 128
    x, residual = randn(rows, 1024, dtype=h, seed=1), randn(rows, 1024, dtype=h, seed=2)
    weight, qk_w = norm_weight(1024, h), norm_weight(d, h)
    qkv, gate_up = randn(rows, (n_q + 2 * n_kv) * d, dtype=h, seed=3), randn(rows, 6144, dtype=h, seed=4)
    cos, sin = rope_tables(rows // 2, d, h)
    cond, uncond = head_logits(300, torch.float32, seed=5), head_logits(300, torch.float32, seed=6)
    inputs = (x, residual, qkv, gate_up, cond, uncond)

    def step(out):
        add_rmsnorm(x, residual, weight, EPS, out=out["norm"])
        qk_norm_rope(qkv, qk_w, qk_w, cos, sin, n_q, n_kv, EPS, out=out["qkv"])
        swiglu(gate_up, out=out["swiglu"])
        cfg_score(cond, uncond, 2.0, PENALTY, MASK_ID, out=out["score"])

    def fresh_outputs():
        return {"norm": (torch.empty_like(x), torch.empty_like(x)),
                "qkv": tuple(torch.empty(rows, n, d, dtype=h, device=DEVICE) for n in (n_q, n_kv)),
                "swiglu": torch.empty(rows, 3072, dtype=h, device=DEVICE),
                "score": (torch.empty(8, 300, dtype=torch.int64, device=DEVICE),
                          torch.empty(8, 300, device=DEVICE))}

    static = fresh_outputs()
    step(static)  # compiles every kernel outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(static)
    for t in inputs:
        t.copy_(torch.randn_like(t, dtype=torch.float32).to(t.dtype))
    graph.replay()
    eager = fresh_outputs()
    step(eager)
    torch.cuda.synchronize()
    flat = torch.utils._pytree.tree_leaves
    assert all(torch.equal(a, b) for a, b in zip(flat(static), flat(eager)))
