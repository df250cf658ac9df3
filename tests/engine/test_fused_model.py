"""The model and the static runner with the fused Triton kernels switched on, against the plain PyTorch
path: this checks the adapters in engine/lm/fused_ops.py (layouts, views, the residual order) that the
GPU fast path uses. With CUDA everything runs there (the runner through its CUDA graphs); without it,
on the CPU under Triton's interpreter (tests/conftest.py)."""

import pytest
import torch
from error_budget import assert_as_accurate
from runner_reference import runner_tokens

from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm, load_text_tokenizer
from engine.lm.decode import build_cfg_batch, generate_tokens
from engine.lm.prompt import build_prompt
from engine.lm.runner import StaticRunner

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # Triton compiles for a GPU, else it interprets


@pytest.fixture(scope="module")
def models_and_prompt():
    plain, fused = load_lm(DEMO_MODEL, DEVICE), load_lm(DEMO_MODEL, DEVICE).use_fused_kernels()
    tok = load_text_tokenizer(DEMO_MODEL)
    ref = torch.randint(0, 1024, (8, 12), generator=torch.Generator().manual_seed(1))
    prompt = build_prompt(tok, plain.cfg, "Hello there.", 8, ref_text="Words.",
                          ref_tokens=ref, language="en")
    return plain, fused, prompt


def test_fused_forward_matches_the_torch_path(models_and_prompt):
    """Both fp32 paths are roundings of one exact forward (the plain path in float64): the fused one
    may miss it by no more than the plain one does, up to summation order (tests/error_budget.py)."""
    plain, fused, prompt = models_and_prompt
    batch = build_cfg_batch([prompt], plain.cfg.audio_mask_id, DEVICE)
    exact_lm = load_lm(DEMO_MODEL, DEVICE, torch.float64)
    with torch.inference_mode():
        want = plain(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
        got = fused(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
        exact = exact_lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
    assert got.shape == want.shape == exact.shape
    assert_as_accurate(got.cpu(), want.cpu(), exact.cpu(), what="fused forward")


def test_fused_runner_gives_the_reference_tokens(models_and_prompt):
    plain, fused, prompt = models_and_prompt
    cfg = GenerationConfig(position_temperature=0.0, num_step=4)
    want = generate_tokens(plain, [prompt], cfg, torch.Generator(DEVICE).manual_seed(0))[0]
    runner = StaticRunner(fused, buckets=(64,), fused=True)
    assert runner.eager == (DEVICE == "cpu")  # on a GPU the step replays from a CUDA graph
    got = runner_tokens(runner, [prompt], cfg, [0])[0]
    assert torch.equal(got, want)


def _scaled_mm_runs() -> bool:
    """Rowwise torch._scaled_mm on DEVICE: FP8 tensor cores (sm_89+) on a GPU, a recent build on a CPU."""
    try:
        one = torch.ones(16, 16, device=DEVICE).to(torch.float8_e4m3fn)
        torch._scaled_mm(one, one.t(), scale_a=torch.ones(16, 1, device=DEVICE),
                         scale_b=torch.ones(1, 16, device=DEVICE), out_dtype=torch.float32)
        return True
    except (RuntimeError, NotImplementedError):
        return False


def _all_fp8_fused_lm(models_and_prompt):
    """The demo LM with every linear W8A8 FP8 on the `_scaled_mm` backend (what runs on an FP8 GPU: Triton
    quantizer + _scaled_mm), fused kernels on, and the prompt's CFG batch."""
    from engine.quant import QuantConfig, W8A8FP8Linear, quantize_

    plain, _, prompt = models_and_prompt
    batch = build_cfg_batch([prompt], plain.cfg.audio_mask_id, DEVICE)
    lm = load_lm(DEMO_MODEL, DEVICE)
    with torch.inference_mode():
        quantize_(lm, QuantConfig(fp8=("*",)), lambda m: m(batch.input_ids, batch.audio_mask, batch.attn_mask))
    for module in lm.modules():
        if isinstance(module, W8A8FP8Linear):
            module.backend = "scaled_mm"
    return lm.use_fused_kernels(), batch


@pytest.mark.skipif(not _scaled_mm_runs(), reason=f"no rowwise torch._scaled_mm on this {DEVICE}")
def test_fp8_linears_take_their_input_quantized_by_the_kernel_before_them(models_and_prompt):
    """Realtime on FP8 GPUs: input_norm, post_attn_norm and SwiGLU hand qkv_proj, gate_up_proj and
    down_proj e4m3 codes (FP8Rows) instead of fp16 (o_proj quantizes its own input); the result must equal
    each linear quantizing its own input (the same kernels' output, the same quantizer), bit for bit."""
    from kernels.fp8 import FP8Rows

    lm, batch = _all_fp8_fused_lm(models_and_prompt)
    block = lm.layers[0]
    assert block.input_norm.fp8_inv_smooth is block.attn.qkv_proj.inv_smooth
    assert block.post_attn_norm.fp8_inv_smooth is block.mlp.gate_up_proj.inv_smooth
    assert block.mlp.fp8_inv_smooth is block.mlp.down_proj.inv_smooth
    handed = []
    hooks = [linear.register_forward_pre_hook(lambda m, args: handed.append(type(args[0])))
             for linear in (block.attn.o_proj, block.mlp.gate_up_proj, block.mlp.down_proj)]
    with torch.inference_mode():
        fused = lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
        for module in lm.modules():  # the same kernels, each linear quantizing its own input
            if hasattr(module, "fp8_inv_smooth"):
                module.fp8_inv_smooth = None
        separate = lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
    for hook in hooks:
        hook.remove()
    assert handed == [torch.Tensor, FP8Rows, FP8Rows] + [torch.Tensor] * 3
    assert torch.equal(fused, separate)


@pytest.mark.skipif(not _scaled_mm_runs(), reason=f"no rowwise torch._scaled_mm on this {DEVICE}")
def test_fp8_gate_up_leaves_its_scales_to_the_swiglu(models_and_prompt):
    """Realtime on FP8 GPUs: gate_up returns its product before the scales (unit-scale `_scaled_mm`, bf16)
    and the fused SwiGLU applies them. Against the exact SwiGLU of the same e4m3 codes (float64), each
    element may miss by what its roundings allow: the bf16 product (2^-8 relative, this path only), the
    scaled gate and up, silu and the product in the model dtype (half an ulp each), what the FP8 sum may
    lose (`fp8_sum_and_bound`). The rowwise path (no bf16 rounding) must meet the same budget without
    the 2^-8: the budget is the analysis of both, not a tolerance fitted to one."""
    from kernels import fp8
    from kernels.fp8_ref import fp8_sum_and_bound

    lm, batch = _all_fp8_fused_lm(models_and_prompt)
    mlps = [block.mlp for block in lm.layers]
    assert all(mlp.gate_up_proj.product_out for mlp in mlps)
    for mlp in mlps:
        mlp.fp8_inv_smooth = None  # SwiGLU's output itself, not its e4m3 codes (test_swiglu_quantizes_in_the_same_pass)
    acc_bits = fp8.accumulator_bits(torch.device(DEVICE)) if DEVICE == "cuda" else 23

    def run() -> list[tuple[fp8.FP8Rows, torch.Tensor]]:
        seen = [[] for _ in mlps]  # per layer: gate_up's FP8Rows, then down_proj's input
        hooks = [hook for mlp, got in zip(mlps, seen) for hook in (
            mlp.gate_up_proj.register_forward_pre_hook(lambda m, args, got=got: got.append(args[0])),
            mlp.down_proj.register_forward_pre_hook(lambda m, args, got=got: got.append(args[0])))]
        with torch.inference_mode():
            lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
        for hook in hooks:
            hook.remove()
        return seen

    def worst_ratio(seen, product_rounding: float) -> float:
        worst = 0.0
        for mlp, (rows, h) in zip(mlps, seen):
            gate_up = mlp.gate_up_proj
            exact, bound = fp8_sum_and_bound(rows.codes, gate_up.qweight, acc_bits)  # [M, 2I] float64
            outer = rows.scales.double()[:, None] * gate_up.wscales.double()[None, :]
            half = exact.shape[1] // 2
            g, u = (exact * outer).split(half, dim=1)
            dg, du = (bound * outer).split(half, dim=1)
            eps = torch.finfo(rows.dtype).eps / 2  # half an ulp, relative, in the model dtype
            silu = torch.nn.functional.silu(g)
            want = silu * u
            dg, du = dg + g.abs() * (product_rounding + eps), du + u.abs() * (product_rounding + eps)
            allowed = 1.1 * u.abs() * dg + silu.abs() * du + 2 * eps * want.abs() + 2.0 ** -24 * want.abs().max()
            err = (h.reshape(want.shape).double() - want).abs()
            worst = max(worst, (err / allowed).max().item())
        return worst

    fused = run()
    assert all(type(got) is torch.Tensor for _, got in fused)  # SwiGLU's output: scaled, in the model dtype
    assert worst_ratio(fused, product_rounding=torch.finfo(torch.bfloat16).eps / 2) <= 1
    for mlp in mlps:
        mlp.gate_up_proj.product_out = False  # the rowwise path: scales inside the GEMM
    assert worst_ratio(run(), product_rounding=0.0) <= 1


@pytest.mark.skipif(not _scaled_mm_runs(), reason=f"no rowwise torch._scaled_mm on this {DEVICE}")
def test_fp8_o_proj_and_down_proj_products_join_the_residual_stream_in_the_next_norm(models_and_prompt, monkeypatch):
    """o_proj and down_proj return their products before the scales (FP8Product): the residual add + RMSNorm after
    each (post_attn_norm; the next block's input norm, after the last block the final norm) applies row scale x
    column scale in fp32 and rounds to the model dtype as it reads, so each new residual equals the stream plus
    `scaled_product_ref` of the product bit for bit, and every product is consumed, the last one's too."""
    from engine.lm import fused_ops
    from kernels.fp8 import FP8Product, scaled_product_ref

    lm, batch = _all_fp8_fused_lm(models_and_prompt)
    assert all(block.attn.o_proj.product_out and block.mlp.down_proj.product_out for block in lm.layers)
    calls, add_rmsnorm = [], fused_ops.add_rmsnorm

    def recording(h, residual, norm):
        normed, new_residual = add_rmsnorm(h, residual, norm)
        calls.append((h, residual, norm, new_residual))
        return normed, new_residual

    monkeypatch.setattr(fused_ops, "add_rmsnorm", recording)
    with torch.inference_mode():
        lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
    products = [call for call in calls if isinstance(call[0], FP8Product)]
    next_norms = [block.input_norm for block in lm.layers[1:]] + [lm.norm]
    want = [norm for block, after in zip(lm.layers, next_norms) for norm in (block.post_attn_norm, after)]
    assert [norm for _, _, norm, _ in products] == want
    for h, residual, _, new_residual in products:
        value = scaled_product_ref(h.raw, row_scales=h.row_scales, col_scales=h.col_scales, out_dtype=h.dtype)
        assert torch.equal(new_residual, residual + value.view(h.shape))


@pytest.mark.skipif(not _scaled_mm_runs(), reason=f"no rowwise torch._scaled_mm on this {DEVICE}")
def test_all_four_fp8_linears_fused_are_as_accurate_as_the_fp8_reference(models_and_prompt):
    """Realtime with every projection FP8 on the fused path (unit-scale products, quantizing norms and SwiGLU)
    against the unquantized model: its logits may miss by what the FP8 reference backend misses (the same
    conversion, fp32 arithmetic, no fused kernel) plus what the path adds on top. The bf16 products add one
    rounding of unit 2^-9 per element where the e4m3 codes round with unit 2^-4: each linear's added error is at
    most 2^-5 of its quantization error, and errors the model carries forward grow no faster than the
    quantization errors themselves, so the total is at most (1 + 2^-5) times the reference's, widened to
    (1 + 2^-3) for the code flips the extra rounding can set off (each one e4m3 step of one element)."""
    from engine.quant import W8A8FP8Linear

    plain, _, _ = models_and_prompt
    lm, batch = _all_fp8_fused_lm(models_and_prompt)
    args = (batch.input_ids, batch.audio_mask, batch.attn_mask)
    with torch.inference_mode():
        want = plain(*args, rows=batch.rows).double()
        fused = lm(*args, rows=batch.rows).double()
        for module in lm.modules():
            if isinstance(module, W8A8FP8Linear):
                module.backend = "ref"
            if hasattr(module, "fused"):
                module.fused = False
        ref = lm(*args, rows=batch.rows).double()
    err_fused, err_ref = (fused - want).norm().item(), (ref - want).norm().item()
    assert err_ref > 1e-3 * want.norm().item()  # quantized: the reference is FP8's, not fp32's
    assert err_fused <= (1 + 2.0 ** -3) * err_ref, (err_fused, err_ref)


def _int8_down_lm(models_and_prompt):
    """The demo LM with QuantConfig(w8a8=("*.down_proj",)) (W4A4 where K is a multiple of 64, fp32 elsewhere), its
    int8 down_projs, and the prompt's CFG batch."""
    from engine.quant import QuantConfig, W8A8Linear, quantize_

    plain, _, prompt = models_and_prompt
    batch = build_cfg_batch([prompt], plain.cfg.audio_mask_id, DEVICE)
    lm = load_lm(DEMO_MODEL, DEVICE)
    # converted as the engine converts (engine/lm/modes.py: outside inference mode): the W4A4 linears' Triton path
    # keys its cached weight codes on qweight's version, which an inference tensor does not keep
    with torch.no_grad():
        plan = quantize_(lm, QuantConfig(w8a8=("*.down_proj",)),
                         lambda m: m(batch.input_ids, batch.audio_mask, batch.attn_mask))
    assert all(scheme == "w8a8" for name, scheme in plan.items() if name.endswith("down_proj"))
    downs = [block.mlp.down_proj for block in lm.layers]
    assert all(isinstance(down, W8A8Linear) for down in downs)
    return lm, downs, batch


def _use_int8_backend(lm, downs, backend: str):
    for down in downs:
        down.backend = backend
    return lm.use_fused_kernels()


def test_int8_down_proj_takes_its_input_quantized_by_the_swiglu(models_and_prompt):
    """The W4A4 recipe option QuantConfig(w8a8=("*.down_proj",)): the fused SwiGLU hands down_proj Int8Rows and the
    Triton int8 GEMM runs; the logits must equal the same fused model with down_proj on the plain-PyTorch reference,
    bit for bit (the kernels compute the reference's roundings in its order)."""
    from kernels.int8 import Int8Rows

    lm, downs, batch = _int8_down_lm(models_and_prompt)

    def logits(backend: str) -> tuple[torch.Tensor, list[type]]:
        _use_int8_backend(lm, downs, backend)
        handed = []
        hook = downs[0].register_forward_pre_hook(lambda m, args: handed.append(type(args[0])))
        with torch.inference_mode():
            out = lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows)
        hook.remove()
        return out, handed

    fast, handed = logits("triton")
    assert lm.layers[0].mlp.int8_smooth is downs[0].smooth and handed == [Int8Rows]
    ref, handed = logits("ref")
    assert lm.layers[0].mlp.int8_smooth is None and handed == [torch.Tensor]
    assert torch.equal(fast, ref)


def test_int8_down_proj_runs_in_the_runner(models_and_prompt):
    """The same model in the static runner (on a GPU: its steps captured in and replayed from CUDA graphs) gives the
    tokens of the reference backend's run through the same runner: the int8 kernels capture and replay."""
    _, _, prompt = models_and_prompt
    lm, downs, _ = _int8_down_lm(models_and_prompt)
    cfg = GenerationConfig(position_temperature=0.0, num_step=4)
    tokens = {}
    for backend in ("ref", "triton"):
        runner = StaticRunner(_use_int8_backend(lm, downs, backend), buckets=(64,), fused=True)
        assert runner.eager == (DEVICE == "cpu")
        tokens[backend] = runner_tokens(runner, [prompt], cfg, [0])[0]
    assert torch.equal(tokens["triton"], tokens["ref"])
