"""One lone step against one batched step: N takes of one line (Engine.takes, one packed batch) under the PyTorch
profiler, per diffusion step: GPU time by kernel category, and the rate the GEMMs of the model reach.

    python -m tools.profile_takes [--demo | --model PATH] [--mode hifi] [--takes 1,8] [--workload baseline]

The rate counts the model's own GEMMs at the rows they run over: the four linears of every layer (qkv, o,
gate_up, down) over every row of the captured bucket (its padding included), and the audio heads over the
target rows. The codec's decode (once per take, after the steps) is in the profile too: its GEMM is small,
its convolutions are the "conv" category. Set against the GPU's dense FP16 tensor-core rate (--peak-tflops,
the H200's 989 by default), it says how much a batch can still gain from the GEMMs running fuller."""
from __future__ import annotations

import argparse
import json

import torch

from engine.config import GenerationConfig
from engine.engine import Engine
from engine.lm.plan import plan_request
from engine.lm.runner import packed_rows
from engine.request import SpeechRequest
from tools.model_options import add_model_options, load_engine
from tools.trace import profile_call
from tools.work_per_audio import gemm_flop
from tools.workloads import LANGUAGES, SAMPLE_RATE, select

H200_DENSE_FP16_TFLOPS = 989.0  # NVIDIA's H200 SXM figure without sparsity


def profile_rows(engine: Engine, workload: str, takes: list[int], peak_tflops: float) -> list[dict]:
    """One row per N: the profile of N takes of `workload` in one batch, per step (printed as it goes)."""
    (w,) = select(workload)
    voice = engine.voice_from_clip((w.reference(), SAMPLE_RATE), w.ref_text)
    cfg = GenerationConfig(duration=w.duration, seed=0)
    request = SpeechRequest(text=w.text, voice=voice, instruct=None, language=LANGUAGES[w.language], config=cfg)
    prompt = engine._prompt(plan_request(request.with_config(cfg.check())), 0, None)
    rows_one, targets_one = packed_rows(prompt), 2 * prompt.target_len
    out = []
    for n in takes:
        def once(n=n):
            return engine.takes(w.text, voice, language=LANGUAGES[w.language], config=cfg, n=n)

        once()  # warm: this batch's graph, allocations
        stats = profile_call(once, engine.device)
        rows, steps = n * rows_one, cfg.num_step
        bucket = engine.runner.bucket_for(rows) if engine.runner is not None else rows
        gemm_ms = stats.by_category_ms.get("gemm", 0.0) / steps
        flop = gemm_flop(engine.lm.cfg, bucket, n * targets_one)
        tflops = flop / (gemm_ms * 1e-3) / 1e12 if gemm_ms else None
        row = {"workload": w.name, "takes": n, "packed_rows": rows, "bucket_rows": bucket, "steps": steps,
               "busy_ms_per_step": stats.busy_ms / steps,
               "by_category_ms_per_step": {k: v / steps for k, v in stats.by_category_ms.items()},
               "gemm_tflop_per_step": flop / 1e12, "gemm_tflops": tflops,
               "gemm_share_of_peak": tflops / peak_tflops if tflops else None,
               "gpu": torch.cuda.get_device_name() if engine.device.type == "cuda" else "cpu"}
        out.append(row)
        print(json.dumps(row), flush=True)
        print(stats.table(), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser)
    parser.add_argument("--takes", default="1,8")
    parser.add_argument("--workload", default="baseline")
    parser.add_argument("--peak-tflops", type=float, default=H200_DENSE_FP16_TFLOPS)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    engine = load_engine(args)
    rows = profile_rows(engine, args.workload, [int(x) for x in args.takes.split(",")], args.peak_tflops)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
