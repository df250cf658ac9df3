"""What the Realtime check's measures say about a model whose "Realtime" weights are perturbed by noise of a
fraction of each weight matrix's spread (docs/realtime_check.md): `python -m tools.realtime_drift_scan
[--model DIR] [--scales 0 0.01 0.1]` prints a Markdown table. It runs on the CPU, where both modes run the eager
path, so the perturbation is the only difference from the High fidelity render."""
from __future__ import annotations

import argparse

import torch

from engine.checks.realtime import measure, render_check_sentence
from engine.constants import DEMO_MODEL
from engine.engine import Engine


def perturb(engine: Engine, scale: float, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in engine.lm.parameters():
            if p.dim() == 2:
                p.add_(torch.randn(p.shape, generator=gen) * p.std() * scale)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(DEMO_MODEL))
    parser.add_argument("--scales", type=float, nargs="+", default=[0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5])
    args = parser.parse_args(argv)
    hifi = render_check_sentence(Engine.load(args.model, device="cpu", mode="hifi"))
    print("| perturbation (x the spread) | tokens equal | mel dB | verdict |\n| --- | --- | --- | --- |")
    for scale in args.scales:
        engine = Engine.load(args.model, device="cpu", mode="realtime")
        perturb(engine, scale)
        result = measure(render_check_sentence(engine), hifi, None)
        print(f"| {scale:g} | {result.token_agreement:.1%} | {result.mel_db:.2f} | {result.verdict} |".replace(
            "%", " %"), flush=True)


if __name__ == "__main__":
    main()
