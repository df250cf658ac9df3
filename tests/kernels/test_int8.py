"""W8A8 int8: the Triton quantizer, the SwiGLU that quantizes and the int8 GEMM against the plain-PyTorch
contract (`kernels/int8_ref.py`, what `W8A8Linear` computes on the CPU), bit for bit; and the linear's backends.

Without CUDA the kernels run in Triton's interpreter (tests/conftest.py), at the interpreter's small tile.
"""
import pytest
import torch

from engine.quant import QuantConfig, W8A8Linear, backend_label, quantize_
from kernels import int8
from kernels._triton import HAS_TRITON
from kernels.int8_ref import INT8_MAX, int8_rows_linear_ref, quantize_rows_int8_ref
from kernels.numerics import ulp_distance

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="Triton is not installed")
ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
TILES = [t for t in int8.GEMM_TILES if ON_GPU or t == "interpreter"]  # GPU tiles are slow in numpy
TIE_ROW = [127.0, 126.5, 2.5, -3.5, 0.5, -0.5, -125.5]  # amax 127 gives scale 1: the quotients are these ties


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def activations(m: int, k: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Random rows with outlier channels, one all-zero row (the last) and, where K allows, a row of ties."""
    x = 2 * torch.randn(m, k, generator=gen(seed))
    x[:, [1, k // 2]] *= 30
    x[-1] = 0
    if m > 2 and k >= len(TIE_ROW):
        x[0] = 0
        x[0, : len(TIE_ROW)] = torch.tensor(TIE_ROW)
    return x.to(device=DEVICE, dtype=dtype)


def smoothing(k: int, seed: int, tie_row: bool = False) -> torch.Tensor:
    smooth = 0.5 + torch.rand(k, generator=gen(seed))
    if tie_row:
        smooth[: len(TIE_ROW)] = 1  # the tie row's quotients stay exact
    return smooth.to(DEVICE)


def reference_rows(x: torch.Tensor, smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return quantize_rows_int8_ref(x.float() / smooth)


def test_reference_rounds_ties_to_even_and_clamps():
    codes, scales = quantize_rows_int8_ref(torch.tensor([TIE_ROW, [0.0] * 7]))
    assert scales.tolist() == [1.0, 0.0]
    assert codes.tolist() == [[127, 126, 2, -4, 0, 0, -126], [0] * 7]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k", [(1, 16), (3, 200), (17, 1024)])
def test_quantizer_is_bit_exact(m, k, dtype):
    x = activations(m, k, dtype, seed=m + k)
    smooth = smoothing(k, seed=k, tie_row=True)
    rows = int8.quantize_act_int8(x, smooth)
    codes, scales = reference_rows(x, smooth)
    assert rows.codes.dtype == torch.int8 and rows.shape == x.shape and rows.dtype == dtype
    assert torch.equal(rows.codes, codes) and torch.equal(rows.scales, scales)
    assert rows.scales[-1] == 0 and (rows.codes[-1] == 0).all()
    assert m == 1 or rows.codes.abs().max() == INT8_MAX
    if m > 2 and k >= len(TIE_ROW):
        assert rows.codes[0, : len(TIE_ROW)].tolist() == [127, 126, 2, -4, 0, 0, -126]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n_cols", [(1, 16), (5, 96), (3, 100), (4, 3072)])
def test_swiglu_quantizes_in_the_same_pass(m, n_cols, dtype):
    """Bit for bit the standalone quantizer of swiglu's output (both halves masked where 3 slices overrun)."""
    from kernels.swiglu import swiglu, swiglu_int8

    gate_up = activations(m, 2 * n_cols, dtype, seed=m * n_cols)
    smooth = smoothing(n_cols, seed=n_cols)
    rows = swiglu_int8(gate_up, smooth)
    want = int8.quantize_act_int8(swiglu(gate_up), smooth)
    assert rows.shape == (m, n_cols) and rows.dtype == dtype
    assert torch.equal(rows.codes, want.codes) and torch.equal(rows.scales, want.scales)
    assert rows.scales[-1] == 0 and (rows.codes[-1] == 0).all()


def weights(n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    codes, scales = quantize_rows_int8_ref(torch.randn(n, k, generator=gen(seed)) * (1 + torch.arange(n))[:, None])
    return codes.to(DEVICE), scales.to(DEVICE)


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n,bias", [(1, 64, 16, False), (3, 200, 24, True), (33, 96, 40, False),
                                        (17, 3072, 72, True)])
def test_gemm_is_bit_exact(m, k, n, bias, dtype, tile):
    """M past the tile's edge, K not a multiple of BLOCK_K (masked) and a multiple, N past the edge."""
    x = activations(m, k, dtype, seed=m * k)
    a = int8.quantize_act_int8(x, smoothing(k, seed=1))
    qweight, wscales = weights(n, k, seed=n)
    b = torch.randn(n, generator=gen(2)).to(device=DEVICE, dtype=dtype) if bias else None
    y = int8.int8_gemm(a, qweight, wscales, b, tile=tile)
    assert y.dtype == dtype and y.shape == (m, n)
    want = int8_rows_linear_ref(a.codes, a.scales, qweight, wscales, b, dtype)
    if dtype == torch.bfloat16 and not ON_GPU:  # the interpreter's fp32 -> bf16 cast truncates (the GPU's rounds)
        assert ulp_distance(y, want).max() <= 1
    else:
        assert torch.equal(y, want)


@pytest.mark.parametrize("tile", TILES)
def test_gemm_sums_exactly_past_fp32s_integers(tile):
    """127 * 127 * 3072 > 2**24: an fp32 accumulator would round; int32 sums are exact, rounded once."""
    k = 3072
    a = int8.Int8Rows(torch.full((3, k), 127, dtype=torch.int8, device=DEVICE), torch.ones(3, device=DEVICE),
                      torch.Size((3, k)), torch.float32)
    w = torch.full((16, k), -127, dtype=torch.int8, device=DEVICE)
    w[1, 0] = -126  # the sum + 127: not an fp32 integer at this size (spacing 4), rounded to nearest once
    y = int8.int8_gemm(a, w, torch.ones(16, device=DEVICE), tile=tile)
    exact = -127 * 127 * k
    assert y[0, 0].item() == exact and y[0, 1].item() == torch.tensor(exact + 127, dtype=torch.float32).item()


def test_gemm_checks_its_arguments():
    a = int8.quantize_act_int8(activations(3, 64, torch.float16, seed=0), smoothing(64, seed=0))
    qweight, wscales = weights(16, 64, seed=0)
    with pytest.raises(ValueError, match="qweight"):
        int8.int8_gemm(a, qweight.float(), wscales)
    with pytest.raises(ValueError, match="wscales"):
        int8.int8_gemm(a, qweight, wscales[:8])
    with pytest.raises(ValueError, match="must be contiguous"):
        int8.int8_gemm(a, torch.cat([qweight, qweight], dim=1)[:, ::2], wscales)


def linear_pair(k: int, n: int, bias: bool) -> tuple[W8A8Linear, W8A8Linear]:
    """The same W8A8Linear twice: on the Triton backend and on the reference."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(k, n, bias=bias).to(device=DEVICE, dtype=torch.float16)
    amax = activations(8, k, torch.float32, seed=3).abs().amax(0)
    fast, ref = (W8A8Linear.from_linear(linear, amax, QuantConfig()) for _ in range(2))
    fast.backend, ref.backend = "triton", "ref"
    return fast, ref


def test_linear_backends_agree_bit_for_bit():
    fast, ref = linear_pair(200, 24, bias=True)
    x = activations(10, 200, torch.float16, seed=4).view(2, 5, 200)
    assert fast.int8_input_smooth() is fast.smooth and ref.int8_input_smooth() is None
    with torch.inference_mode():
        y = fast(x)
        assert y.shape == (2, 5, 24) and torch.equal(y, ref(x))
        rows = int8.quantize_act_int8(x.view(10, 200), fast.smooth)._replace(shape=x.shape)
        assert torch.equal(fast(rows), y)  # handed the quantized rows, as the fused SwiGLU does


def test_linear_picks_triton_only_on_a_cuda_gpu():
    layer = W8A8Linear(64, 16, bias=False, device=DEVICE)
    assert layer.backend_name() == ("triton" if ON_GPU and torch.cuda.get_device_capability() >= (8, 0) else "ref")
    assert W8A8Linear(64, 16, bias=False).backend_name() == "ref"  # on the CPU: the reference, even with Triton


def test_the_gemm_runs_on_int8_tensor_cores_on_ada():
    """The interpreter never compiles: build the int8 kernels for sm_89 (L4, RTX 40; Triton's compiler and ptxas, no
    GPU) and read the SASS: every GEMM tile issues IMMA on int8 operands, and nothing spills."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton.backends.nvidia.compiler", reason="Triton without its NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "tools.kernels.aot", "int8", "89"], capture_output=True, text=True,
                         env=env, cwd=Path(__file__).parents[2], timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    gemms = [line for line in run.stdout.splitlines() if "sass:" in line][2:]  # after the quantizer and the SwiGLU
    assert len(gemms) == len(int8.GEMM_TILES) - 1 and all("IMMA.16832.S8.S8" in line for line in gemms), run.stdout
    assert run.stdout.count("LOCAL:0 ") == len(int8.GEMM_TILES) + 1, run.stdout


def test_the_ui_label_names_the_int8_layers():
    """realtime.backend_label lists every quantized kind a model holds: here W4A4 (K = 64) and an int8 down_proj."""
    model = torch.nn.Module()
    model.qkv_proj, model.down_proj = torch.nn.Linear(64, 128), torch.nn.Linear(128, 32)
    x = torch.randn(4, 64, generator=gen(0))
    plan = quantize_(model, QuantConfig(rank=16, w8a8=("down_proj",)), lambda m: m.down_proj(m.qkv_proj(x)))
    assert plan == {"qkv_proj": "w4a4", "down_proj": "w8a8"}
    assert backend_label(model) == "W4A4 PyTorch reference + W8A8 int8 PyTorch reference"  # on the CPU
    model.down_proj.backend = "triton"
    assert backend_label(model) == "W4A4 PyTorch reference + W8A8 int8-MMA Triton"
