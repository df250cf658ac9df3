"""Realtime as RTX 30/40 and L4 run it by default, on a GPU without INT4 tensor cores:
`python -m tools.kernels.check_int4_runner --model DIR [--json FILE]`.

On those cards Realtime's linears are the CUDA INT4 GEMM (NVRTC, `kernels/w4a4_cuda.py`) launched inside the graph
runner's CUDA graphs; the H200s the project measures on take FP8 instead, so that path had never been captured. An
sm_90 GPU runs the same PTX through an emulation of the INT4 MMA (slow, exact), so here the arch is counted as
native for one engine (W4A4 on the CUDA GEMM), and a second engine of the same conversion runs the Triton W4A4 GEMM.
Checks: the CUDA engine captures and says "W4A4 INT4-MMA"; its renders are finite and the same twice; its first-step
logits agree with the Triton engine's (1 - cosine <= 1e-4: both compute the contract's exact integer group sums
and scales and differ only in fp32 summation order and the fp16 roundings of each linear's output, ~1e-3 relative
per linear at most, which leaves the logits' cosine within (1.4e-2)**2 / 2 of 1 through 28 layers). Reports how
many tokens of the two renders agree (not checked: with random weights one flipped near-tie changes the rest).
Exits 1 when a check fails. Use a random-weight checkpoint of the released sizes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

COSINE_GAP = 1e-4


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.kernels.check_int4_runner",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint folder (random weights of the released sizes)")
    parser.add_argument("--json", help="write the figures to this file")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    import numpy as np
    import torch

    from engine import Engine
    from engine.config import GenerationConfig
    from engine.constants import SAMPLE_RATE
    from engine.quant import linears
    from engine.quant.realtime import REALTIME_ENV
    from kernels import w4a4_cuda
    from tools.workloads import REF_TEXTS, TEXTS, synthetic_voice

    native = w4a4_cuda.NATIVE_INT4_ARCHS
    arch = w4a4_cuda.arch_of(torch.device("cuda"))
    w4a4_cuda.NATIVE_INT4_ARCHS = (*native, arch)  # emulated INT4 MMA on sm_90: the CUDA GEMM's own code path
    int4 = Engine.load(args.model, device="cuda", mode="realtime")
    for layer in int4.lm.modules():  # kept on the CUDA GEMM for the eager forward below, once the arch is restored
        if isinstance(layer, linears.W4A4Linear):
            layer.backend = layer.backend_name()
    w4a4_cuda.NATIVE_INT4_ARCHS = native
    linears.select_backend.cache_clear()
    os.environ[REALTIME_ENV] = "w4a4"  # the same W4A4 conversion (cached), on the Triton GEMM
    triton = Engine.load(args.model, device="cuda", mode="realtime")

    voice = int4.voice_from_clip((synthetic_voice(6, seed=6), SAMPLE_RATE), REF_TEXTS[6])
    config = GenerationConfig(seed=0, position_temperature=0.0, duration=3.0)
    text = TEXTS["en"][3]
    first, again = (int4.synthesize(text, voice, config=config) for _ in range(2))
    other = triton.synthesize(text, voice, config=config)
    a, b = (torch.cat([t.flatten() for t in r.tokens]) for r in (first, other))
    la, lb = (e.first_step_logits(text, voice, config=config).double().flatten() for e in (int4, triton))
    gap = float(1 - torch.nn.functional.cosine_similarity(la, lb, dim=0))
    figures = {"int4_backend": int4.backend, "triton_backend": triton.backend, "logit_cosine_gap": gap,
               "token_agreement": float((a == b).double().mean()) if a.shape == b.shape else None}
    checks = {
        "the CUDA engine runs the INT4 GEMM": int4.backend.startswith("W4A4 INT4-MMA"),
        "the other engine runs Triton's W4A4 GEMM": "Triton" in triton.backend,
        "finite audio": bool(np.isfinite(first.audio).all() and np.abs(first.audio).max() > 0),
        "the same render twice": all(torch.equal(x, y) for x, y in zip(first.tokens, again.tokens)),
        f"first-step logits: 1 - cosine <= {COSINE_GAP}": gap <= COSINE_GAP,
    }
    print(json.dumps(figures))
    for name, ok in checks.items():
        print(f"{'ok    ' if ok else 'FAILED'} {name}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({**figures, "checks": checks}, out)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
