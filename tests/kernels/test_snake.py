"""kernels.snake: the fused Snake (with the conv bias and residual it can add first) against its
plain-PyTorch reference, by the accuracy rule of test_kernels_fused (Triton's interpreter without
CUDA; on a GPU also at the codec's shapes, where it must give PyTorch's own bits)."""
import pytest
import torch

pytest.importorskip("triton")

from test_kernels_fused import DEVICE, ON_GPU, assert_matches_torch, poisoned

from kernels.snake import snake, snake_input_ref, snake_ref

gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs CUDA (codec-size shapes are too slow to interpret)")
DTYPES = [torch.float16, torch.float32,
          pytest.param(torch.bfloat16,
                       marks=pytest.mark.skipif(not ON_GPU, reason="the interpreter truncates to bf16"))]
# (batch, channels, length): a row of one sample, short rows (several per program, over several blocks),
# long rows (one past a full block)
SHAPES = [(1, 1, 1), (1, 3, 17), (3, 7, 200), (2, 5, 1000), (1, 4, 1025)]
# the real decoder at T = 625 frames: its first Snake (1024 channels), one between, its last (32 x 600,000)
CODEC_SHAPES = [(1, 1024, 625), (1, 256, 25_000), (1, 32, 600_000)]
PENDING = ["none", "bias", "residual", "bias+residual"]


def inputs(shape, dtype, pending, seed=0):
    """x, alpha [1, C, 1] (both signs, 0.05..3), and the bias / residual the case adds."""
    g = torch.Generator().manual_seed(seed)
    channels = shape[1]
    x = 4 * torch.randn(shape, generator=g)
    sign = torch.where(torch.rand(channels, generator=g) < 0.2, -1.0, 1.0)
    alpha = sign * (0.05 + 2.95 * torch.rand(channels, generator=g))
    bias = torch.randn(channels, generator=g) if "bias" in pending else None
    residual = 8 * torch.randn(shape, generator=g) if "residual" in pending else None
    return [None if t is None else t.to(DEVICE, dtype) for t in (x, alpha.view(1, channels, 1), bias, residual)]


def as_double(*tensors):
    return [None if t is None else t.double() for t in tensors]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pending", PENDING)
@pytest.mark.parametrize("shape", SHAPES + [pytest.param(s, marks=gpu_only) for s in CODEC_SHAPES])
def test_snake_matches_torch(shape, pending, dtype):
    x, alpha, bias, residual = inputs(shape, dtype, pending)
    y, h = poisoned(*shape, dtype=dtype), poisoned(*shape, dtype=dtype)
    snake(x, alpha, bias=bias, residual=residual, out=y, input_out=h)
    x64, alpha64, bias64, residual64 = as_double(x, alpha, bias, residual)
    assert_matches_torch(y, snake_ref(x, alpha, bias=bias, residual=residual),
                         snake_ref(x64, alpha64, bias=bias64, residual=residual64))
    assert torch.equal(h, snake_input_ref(x, bias=bias, residual=residual))  # additions alone: no freedom
    assert torch.equal(snake(x, alpha, bias=bias, residual=residual), y)  # allocating its own output changes nothing


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", CODEC_SHAPES)
def test_snake_gives_pytorchs_bits_on_gpu(shape, dtype):
    """CUDA's sinf, PyTorch's roundings and no FMAs: the codec's fused path changes no output bit."""
    x, alpha, bias, residual = inputs(shape, dtype, "bias+residual", seed=1)
    assert torch.equal(snake(x, alpha, bias=bias, residual=residual), snake_ref(x, alpha, bias=bias, residual=residual))


def test_snake_in_place():
    """out and input_out may be the tensors they replace: each element is read before it is written."""
    x, alpha, bias, residual = inputs((2, 3, 300), torch.float32, "bias+residual")
    want_y, want_h = snake(x, alpha, bias=bias, residual=residual), snake_input_ref(x, bias=bias, residual=residual)
    y = snake(x, alpha, bias=bias, residual=residual, out=x, input_out=residual)
    assert y is x and torch.equal(x, want_y) and torch.equal(residual, want_h)


@pytest.mark.parametrize("change,message", [
    (lambda a: {**a, "x": a["x"][0]}, r"x: expected \[batch, channels, length\]"),
    (lambda a: {**a, "x": a["x"].transpose(1, 2).contiguous().transpose(1, 2)}, "x: .*contiguous"),
    (lambda a: {**a, "alpha": a["alpha"].view(-1)}, r"alpha: expected shape \(1, 3, 1\)"),
    (lambda a: {**a, "alpha": a["alpha"].half()}, "alpha: expected dtype"),
    (lambda a: {**a, "bias": a["bias"][:2]}, r"bias: expected shape \(3,\)"),
    (lambda a: {**a, "residual": a["residual"][..., ::2]}, "residual: expected shape"),
    (lambda a: {**a, "out": torch.empty(2, 3, 4, device=DEVICE)}, "out: expected shape"),
    (lambda a: {**a, "input_out": torch.empty(2, 3, 7, dtype=torch.float64, device=DEVICE)},
     "input_out: expected dtype"),
])
def test_snake_rejects_bad_arguments(change, message):
    x, alpha, bias, residual = inputs((2, 3, 7), torch.float32, "bias+residual")
    args = change({"x": x, "alpha": alpha, "bias": bias, "residual": residual})
    with pytest.raises(ValueError, match=message):
        snake(args.pop("x"), args.pop("alpha"), **args)


@gpu_only
def test_snake_replays_in_a_cuda_graph():
    """Captured with static out= buffers, a replay on new inputs equals an eager call."""
    x, alpha, bias, residual = inputs((1, 64, 48_000), torch.float32, "bias+residual")
    y, h = torch.empty_like(x), torch.empty_like(x)
    snake(x, alpha, bias=bias, residual=residual, out=y, input_out=h)  # compiles outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        snake(x, alpha, bias=bias, residual=residual, out=y, input_out=h)
    x.copy_(torch.randn_like(x))
    residual.copy_(torch.randn_like(residual))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, snake(x, alpha, bias=bias, residual=residual))
    assert torch.equal(h, snake_input_ref(x, bias=bias, residual=residual))
