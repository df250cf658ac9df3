"""Time each fused kernel against its PyTorch reference at OmniVoice's shapes, and check its error.

Run on a CUDA machine from the repository root:

    python -m tools.kernels.bench_fused [--dtype fp16|bf16] [--rows 600 1200]

For each kernel and row count it prints the median time of the PyTorch reference and of the kernel
(`triton.testing.do_bench`), then, per output, the largest error against an fp32 reference for the
kernel and for PyTorch in the same dtype, the share of elements bit-identical to PyTorch's and the
largest distance to them in ulps. The scoring step runs on fp32 logits [8, rows / 2, 1025] (the
target frames of a request whose cond + uncond rows number `rows`); its token row counts tokens that
differ from PyTorch's and its score error is measured against PyTorch's fp32 scores.
"""
import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
from triton.testing import do_bench

from kernels.cfg_score import cfg_score, cfg_score_ref
from kernels.numerics import ulp_distance
from kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_ref
from kernels.rmsnorm import add_rmsnorm, add_rmsnorm_ref, rmsnorm, rmsnorm_ref
from kernels.swiglu import swiglu, swiglu_ref

HIDDEN, N_Q_HEADS, N_KV_HEADS, HEAD_DIM, INTERMEDIATE = 1024, 16, 8, 128, 3072
CODEBOOKS, CLASSES, MASK_ID, GUIDANCE, PENALTY = 8, 1025, 1024, 2.0, 5.0
EPS = 1e-6
DEVICE = "cuda"


@dataclass
class Case:
    name: str
    kernel: Callable[[], tuple]
    torch: Callable[[], tuple]
    fp32: Callable[[], tuple]  # the same computation on fp32 copies of the inputs
    outputs: tuple[str, ...]


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _rope_tables(positions, dtype):
    inv_freq = 1.0 / 1_000_000.0 ** (torch.arange(0, HEAD_DIM, 2, device=DEVICE).float() / HEAD_DIM)
    angles = torch.arange(positions, device=DEVICE).float()[:, None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def cases(rows: int, dtype: torch.dtype) -> list[Case]:
    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, device=DEVICE)).to(dtype)

    x, residual = randn(rows, HIDDEN), randn(rows, HIDDEN, scale=4.0)
    weight = 1 + randn(HIDDEN, scale=0.2)
    qkv = randn(rows, (N_Q_HEADS + 2 * N_KV_HEADS) * HEAD_DIM, scale=3.0)
    q_weight, k_weight = 1 + randn(HEAD_DIM, scale=0.2), 1 + randn(HEAD_DIM, scale=0.2)
    cos, sin = _rope_tables(rows // 2, dtype)  # cond and uncond rows at the same positions
    gate_up = randn(rows, 2 * INTERMEDIATE, scale=3.0)
    frames = rows // 2
    cond = 4 * torch.randn(frames, CODEBOOKS, CLASSES, device=DEVICE).transpose(0, 1)  # [C, T, V] slices
    uncond = 4 * torch.randn(frames, CODEBOOKS, CLASSES, device=DEVICE).transpose(0, 1)
    f = {name: t.float() for name, t in dict(x=x, residual=residual, weight=weight, qkv=qkv, q_weight=q_weight,
                                              k_weight=k_weight, cos=cos, sin=sin, gate_up=gate_up).items()}
    heads = (N_Q_HEADS, N_KV_HEADS, EPS)
    return [
        Case("rmsnorm", lambda: rmsnorm(x, weight, EPS), lambda: rmsnorm_ref(x, weight, EPS),
             lambda: rmsnorm_ref(f["x"], f["weight"], EPS), ("y",)),
        Case("add_rmsnorm", lambda: add_rmsnorm(x, residual, weight, EPS),
             lambda: add_rmsnorm_ref(x, residual, weight, EPS),
             lambda: add_rmsnorm_ref(f["x"], f["residual"], f["weight"], EPS), ("normed", "residual")),
        Case("qk_norm_rope", lambda: qk_norm_rope(qkv, q_weight, k_weight, cos, sin, *heads),
             lambda: qk_norm_rope_ref(qkv, q_weight, k_weight, cos, sin, *heads),
             lambda: qk_norm_rope_ref(f["qkv"], f["q_weight"], f["k_weight"], f["cos"], f["sin"], *heads),
             ("q", "k", "v")),
        Case("swiglu", lambda: swiglu(gate_up), lambda: swiglu_ref(gate_up), lambda: swiglu_ref(f["gate_up"]),
             ("y",)),
        Case("cfg_score", lambda: cfg_score(cond, uncond, GUIDANCE, PENALTY, MASK_ID),
             lambda: cfg_score_ref(cond, uncond, GUIDANCE, PENALTY, MASK_ID),
             lambda: cfg_score_ref(cond, uncond, GUIDANCE, PENALTY, MASK_ID), ("tokens", "scores")),
    ]


def error_columns(out: torch.Tensor, torch_out: torch.Tensor, fp32_out: torch.Tensor) -> str:
    if out.dtype == torch.int64:
        return f"{(out != torch_out).sum().item()} differ"
    kernel_err = (out.float() - fp32_out).abs().max().item()
    torch_err = (torch_out.float() - fp32_out).abs().max().item()
    ulps = ulp_distance(out, torch_out)
    identical = 100.0 * (ulps == 0).float().mean().item()
    return f"{kernel_err:10.3g} {torch_err:10.3g} {identical:8.3f}% {ulps.max().item():5d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    parser.add_argument("--rows", type=int, nargs="+", default=[600, 1200], help="even: cond + uncond halves")
    args = parser.parse_args()
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, {args.dtype}")
    print(f"{'kernel':14} {'rows':>5} {'torch us':>9} {'triton us':>9} {'speedup':>7}  {'output':9}"
          f"{'err kernel':>10} {'err torch':>10} {'bit-same':>9} {'ulps':>5}")
    for rows in args.rows:
        for case in cases(rows, dtype):
            torch_us = 1e3 * do_bench(case.torch, return_mode="median")
            kernel_us = 1e3 * do_bench(case.kernel, return_mode="median")
            outs, torch_outs, fp32_outs = (_as_tuple(fn()) for fn in (case.kernel, case.torch, case.fp32))
            lead = f"{case.name:14} {rows:5d} {torch_us:9.1f} {kernel_us:9.1f} {torch_us / kernel_us:6.2f}x"
            for name, out, torch_out, fp32_out in zip(case.outputs, outs, torch_outs, fp32_outs):
                print(f"{lead}  {name:9}{error_columns(out, torch_out, fp32_out)}")
                lead = " " * len(lead)


if __name__ == "__main__":
    main()
