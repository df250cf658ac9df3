"""The ragged (packed-sequence) attention kernel against SDPA under the equivalent mask.

Without CUDA it runs in Triton's interpreter at small odd shapes, with tiles that straddle the
sequence bounds and key ranges longer than one block; with CUDA also at the runner's shapes (16 query
heads, 8 KV heads, head_dim 128, a 6 s + 11.6 s request in its 896-row bucket). Accuracy rule as for
the other kernels: error against a float64 reference at most twice PyTorch's own in the same dtype,
plus one ulp of the largest output. Outputs are poisoned with NaN first, so a row never written fails.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.ragged_attention import key_range_mask, ragged_attention, ragged_attention_ref

ON_GPU = torch.cuda.is_available()  # without CUDA, tests/conftest.py has turned on Triton's interpreter
DEVICE = "cuda" if ON_GPU else "cpu"
pytest.importorskip("triton")
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs CUDA (model-size shapes are too slow to interpret)")


def packed_ranges(bounds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row key ranges of consecutive blocks [bounds[i], bounds[i + 1]) (the runner's layout)."""
    b = torch.tensor(bounds, dtype=torch.int32)
    block = torch.bucketize(torch.arange(bounds[-1], dtype=torch.int32), b[1:], right=True)
    return b[block].to(DEVICE), b[block + 1].to(DEVICE)


def qkv(S, hq, hkv, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple((2 * torch.randn(S, h, d, generator=g)).to(DEVICE, dtype) for h in (hq, hkv, hkv))


def check(bounds, hq, hkv, d, dtype, ranges=None, **settings):
    S = bounds[-1]
    q, k, v = qkv(S, hq, hkv, d, dtype)
    start, end = ranges or packed_ranges(bounds)
    out = ragged_attention(q, k, v, start, end, out=torch.full((S, hq, d), float("nan"), dtype=dtype, device=DEVICE),
                           **settings)
    exact = ragged_attention_ref(q.double(), k.double(), v.double(), start, end)
    torch_err = (ragged_attention_ref(q, k, v, start, end).double() - exact).abs().max().item()
    assert torch.isfinite(out).all(), "rows left unwritten (still NaN) or not finite"
    err = (out.double() - exact).abs().max().item()
    atol = torch.finfo(dtype).eps * exact.abs().max().item()
    assert err <= 2 * torch_err + atol, f"kernel error {err:.3g}, torch {torch_err:.3g}"


SMALL = dict(block_m=16, block_n=16, num_warps=1, num_stages=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("mask_all", [True, False])
@pytest.mark.parametrize("group_heads", [False, True])
@pytest.mark.parametrize("bounds", [
    [0, 23, 36, 45],  # prompt, target, pads: tiles of 16 straddle both inner bounds
    [0, 40, 41, 43],  # a prompt three key blocks long, a one-row target
    [0, 1, 3, 4],  # shorter than one tile
    [0, 16, 48, 80, 85],  # bounds on tile edges: whole blocks only, every program's second half empty
])
def test_ragged_attention_small(bounds, group_heads, mask_all, dtype):
    check(bounds, 4, 2, 16, dtype, group_heads=group_heads, mask_all=mask_all, **SMALL)


@pytest.mark.parametrize("mask_all", [True, False])
def test_ragged_attention_overlapping_ranges(mask_all):
    """Ranges of any shape, not the runner's blocks: each row sees a window of its own start and
    length. A tile skips the mask only on whole blocks from a start all its rows share, up to the
    end they all reach; rows 48..63 share keys 4..49 but not their start, so every block is masked."""
    S = 70
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, S - 1, (S,), generator=g, dtype=torch.int32)
    end = torch.minimum(start + torch.randint(1, 40, (S,), generator=g, dtype=torch.int32), torch.tensor(S))
    start[32:48], end[32:48] = 5, 60  # one range for a whole tile: unmasked blocks from 5, a masked tail
    rows = torch.arange(48, 64, dtype=torch.int32)
    start[48:64], end[48:64] = 2 + rows % 3, 50 + rows % 5  # starts differ: all masked
    check([0, S], 4, 2, 16, torch.float16, ranges=(start.to(DEVICE), end.int().to(DEVICE)), mask_all=mask_all,
          **SMALL)


def test_ragged_attention_ignores_keys_outside_the_ranges():
    S, bounds = 45, [0, 23, 36, 45]
    q, k, v = qkv(S, 2, 1, 16, torch.float32)
    start, end = packed_ranges(bounds)
    out = ragged_attention(q, k, v, start, end, **SMALL)
    k2, v2 = k.clone(), v.clone()
    k2[23:36] += 100.0  # the target's keys and values: the prompt rows must not see them
    v2[23:36] += 1000.0
    assert torch.equal(ragged_attention(q, k2, v2, start, end, **SMALL)[:23], out[:23])


def test_ragged_attention_writes_into_a_view():
    S, hq, d = 45, 4, 16
    q, k, v = qkv(S, hq, 2, d, torch.float16)
    start, end = packed_ranges([0, 23, 36, 45])
    flat = torch.zeros(S, hq * d, dtype=torch.float16, device=DEVICE)  # o_proj's input layout
    ragged_attention(q, k, v, start, end, out=flat.view(S, hq, d), **SMALL)
    assert torch.equal(flat.view(S, hq, d), ragged_attention(q, k, v, start, end, **SMALL))


def test_ragged_attention_reads_v_where_qk_norm_rope_leaves_it():
    """The fused model's layout: q and k in buffers of their own, v a view of the qkv projection's output
    (kernels.qk_norm_rope), so v's row stride is not k's. Equal to a contiguous v, bit for bit."""
    S, hq, hkv, d = 45, 4, 2, 16
    q, k, _ = qkv(S, hq, hkv, d, torch.float16)
    projection = qkv(S, hq + 2 * hkv, 1, d, torch.float16, seed=1)[0]  # [S, hq + 2 hkv, d]: q, k, v heads
    v = projection[:, hq + hkv:]
    start, end = packed_ranges([0, 23, 36, 45])
    for group_heads in (False, True):
        got = ragged_attention(q, k, v, start, end, group_heads=group_heads, **SMALL)
        assert torch.equal(got, ragged_attention(q, k, v.contiguous(), start, end, group_heads=group_heads, **SMALL))


def test_key_range_mask():
    start, end = packed_ranges([0, 2, 3, 5])
    want = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]])
    assert torch.equal(key_range_mask(start, end).cpu(), want.bool())


def test_ragged_attention_rejects_bad_shapes():
    q, k, v = qkv(8, 3, 2, 16, torch.float16)
    start, end = packed_ranges([0, 4, 6, 8])
    with pytest.raises(ValueError, match="multiple"):
        ragged_attention(q, k, v, start, end)
    q, k, v = qkv(8, 4, 2, 16, torch.float16)
    with pytest.raises(ValueError, match="int32"):
        ragged_attention(q, k, v, start.long(), end)


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group_heads", [False, True])
def test_ragged_attention_model_shapes(dtype, group_heads):
    check([0, 560, 850, 896], 16, 8, 128, dtype, group_heads=group_heads)


def test_ragged_attention_compiles_for_hopper_with_wgmma():
    """The interpreter never compiles: build the kernel with its default tiles for sm_90 (Triton's own
    compiler and ptxas, no GPU needed) and check both products are wgmma and nothing spills."""
    pytest.importorskip("triton.backends.nvidia.compiler", reason="Triton without its NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "tools.kernels.aot", "attention", "90"], capture_output=True,
                         text=True, env=env, cwd=Path(__file__).parents[2], timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("STACK:0 ") == 1 and run.stdout.count("LOCAL:0 ") == 1, run.stdout  # no spills
    for mma in ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",  # q k^T: 64 rows x 64 keys
                "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"):  # p v: 64 rows x head_dim 128
        assert mma in run.stdout, run.stdout
