"""Realtime as RTX 30/40 and L4 run it by default, on a GPU without INT4 tensor cores:
`python -m tools.kernels.check_int4_runner --model DIR [--json FILE]`.

On those cards Realtime's linears are the CUDA INT4 GEMM (NVRTC, `kernels/w4a4_cuda.py`) launched inside the graph
runner's CUDA graphs, their activations quantized by the Triton kernel (or, without Triton, by plain PyTorch ops);
the H200s the project measures on take FP8 instead, so that path had never been captured. An sm_90 GPU runs the same
PTX through an emulation of the INT4 MMA (slow, exact), so here the arch is counted as native while the engine loads.
Checks: the engine says "W4A4 INT4-MMA"; its renders (CUDA graphs) are finite and the same twice; its first-step
logits on the CUDA GEMM agree with the same layers on the contract's PyTorch reference (`w4a4_linear_ref`):
1 - cosine <= 1e-4, since both compute the same exact integer group sums and scales and differ only in fp32
summation order and the fp16 roundings of each linear's output, ~1e-3 relative per linear at most, which leaves the
logits' cosine within (1.4e-2)**2 / 2 of 1 through 28 layers. Exits 1 when a check fails. Use a random-weight
checkpoint of the released sizes; run it with Triton unimportable too (pip's Windows PyTorch).
"""
from __future__ import annotations

import argparse
import json
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
    from kernels import w4a4_cuda
    from tools.workloads import REF_TEXTS, TEXTS, synthetic_voice

    native = w4a4_cuda.NATIVE_INT4_ARCHS
    arch = w4a4_cuda.arch_of(torch.device("cuda"))
    w4a4_cuda.NATIVE_INT4_ARCHS = (*native, arch)  # emulated INT4 MMA on sm_90: the CUDA GEMM's own code path
    engine = Engine.load(args.model, device="cuda", mode="realtime")
    layers = [m for m in engine.lm.modules() if isinstance(m, linears.W4A4Linear)]
    backends = {layer.backend_name() for layer in layers}
    w4a4_cuda.NATIVE_INT4_ARCHS = native

    def on(backend: str) -> None:
        for layer in layers:
            layer.backend = backend

    on("cuda")  # pinned: the arch is no longer counted as native
    voice = engine.voice_from_clip((synthetic_voice(6, seed=6), SAMPLE_RATE), REF_TEXTS[6])
    config = GenerationConfig(seed=0, position_temperature=0.0, duration=3.0)
    text = TEXTS["en"][3]
    first, again = (engine.synthesize(text, voice, config=config) for _ in range(2))
    logits = {}
    for backend in ("cuda", "ref"):
        on(backend)
        logits[backend] = engine.first_step_logits(text, voice, config=config).double().flatten()
    on("cuda")
    gap = float(1 - torch.nn.functional.cosine_similarity(logits["cuda"], logits["ref"], dim=0))
    figures = {"backend": engine.backend, "layers": len(layers), "logit_cosine_gap": gap}
    checks = {
        "W4A4 layers on the CUDA INT4 GEMM": bool(layers) and backends == {"cuda"}
                                              and engine.backend.startswith("W4A4 INT4-MMA"),
        "finite audio": bool(np.isfinite(first.audio).all() and np.abs(first.audio).max() > 0),
        "the same render twice": all(torch.equal(x, y) for x, y in zip(first.tokens, again.tokens)),
        f"first-step logits against the reference: 1 - cosine <= {COSINE_GAP}": gap <= COSINE_GAP,
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
