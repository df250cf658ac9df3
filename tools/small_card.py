"""Does VoiceDesk fit an 8 GB card? `python -m tools.small_card --model DIR --mode hifi [--gib 7.0] [--json FILE]`.

On a bigger NVIDIA GPU, caps this process's PyTorch memory at `--gib` GiB (torch.cuda.set_per_process_memory_fraction)
and lets the engine's batch budget see the capped free memory, as on an RTX 3060 8 GB / 4060 whose desktop and CUDA
context hold the rest; then in one quality mode: load the model, make a voice from a 10 s clip, speak the 25 s
workload, 4 takes of the 10 s one and two minutes of prose. Prints, per stage, the peak memory PyTorch reserved and
what failed (a GpuMemoryError says what the app would say), and exits 1 when a stage fails. Use a random-weight
checkpoint of the released sizes (`python -m tools.make_checkpoint --full DIR`): memory does not depend on the weights.
Not counted by the cap: the CUDA context and the driver's copies of kernels, which a real card holds beside it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass

GIB = 2**30


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.small_card", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint folder (random weights of the released sizes)")
    parser.add_argument("--mode", choices=("hifi", "realtime"), default="hifi")
    parser.add_argument("--gib", type=float, default=7.0,
                        help="PyTorch memory allowed, GiB (an 8 GB card less ~1 GB of desktop and CUDA context)")
    parser.add_argument("--json", help="append one JSON line per stage to this file")
    parser.add_argument("--quick", action="store_true", help="load, the voice and the 25 s workload only")
    args = parser.parse_args(argv)
    if not args.gib > 0:
        parser.error(f"--gib must be positive, got {args.gib}")
    return args


@dataclass
class Stage:
    mode: str
    gib: float
    stage: str
    seconds: float
    peak_gib: float  # torch.cuda.max_memory_reserved during the stage
    error: str  # "" when it worked
    note: str = ""


def cap_memory(gib: float, device) -> None:
    """PyTorch may reserve at most `gib` GiB on `device`, and torch.cuda.mem_get_info reports free memory under
    that cap (the engine sizes its batch budget from it)."""
    import torch

    total = torch.cuda.get_device_properties(device).total_memory
    if gib * GIB >= total:
        raise SystemExit(f"--gib {gib} is not below this GPU's {total / GIB:.1f} GiB")
    torch.cuda.set_per_process_memory_fraction(gib * GIB / total, device)
    cap = int(gib * GIB)
    torch.cuda.mem_get_info = lambda device=None: (cap - torch.cuda.memory_reserved(device), cap)


def main(argv: list[str]) -> int:
    args = parse(argv)
    import torch

    from engine import Engine
    from engine.config import GenerationConfig
    from engine.constants import SAMPLE_RATE
    from tools.workloads import REF_TEXTS, TEXTS, prose, synthetic_voice

    device = torch.device("cuda")
    cap_memory(args.gib, device)
    stages: list[Stage] = []
    context: dict = {}

    def stage(name: str, fn) -> None:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        start, error, note = time.perf_counter(), "", ""
        try:
            note = fn() or ""
        except Exception as err:  # noqa: BLE001  (the report says what broke; the next stage still runs)
            error = f"{type(err).__name__}: {err}"
        torch.cuda.synchronize()
        stages.append(Stage(args.mode, args.gib, name, round(time.perf_counter() - start, 2),
                            round(torch.cuda.max_memory_reserved(device) / GIB, 3), error[:600], note))
        print(f"{name:<10} {stages[-1].seconds:>7.2f} s  peak {stages[-1].peak_gib:.2f} GiB  "
              f"{error or 'ok'}  {note}", flush=True)

    def load() -> str:
        engine = context["engine"] = Engine.load(args.model, device="cuda", mode=args.mode)
        buckets = engine.runner.buckets if engine.runner is not None else ()
        return (f"{engine.backend}; budget {engine.budget.bytes / GIB:.2f} GiB, {len(buckets)} buckets up to "
                f"{max(buckets, default=0)} rows")

    def voice() -> None:
        clip = (synthetic_voice(10, seed=10), SAMPLE_RATE)
        context["voice"] = context["engine"].voice_from_clip(clip, REF_TEXTS[10])

    def speak(text: str, duration: float | None = None, takes: int = 1):
        def run() -> str:
            results = context["engine"].takes(text, context["voice"], config=GenerationConfig(duration=duration,
                                                                                               seed=0), n=takes)
            return f"{sum(len(r.audio) for r in results) / SAMPLE_RATE:.1f} s of audio"
        return run

    print(f"== {args.mode}, PyTorch capped at {args.gib} GiB of {torch.cuda.get_device_name(device)}")
    stage("load", load)
    if "engine" in context:
        stage("voice", voice)
    def beside() -> str:
        hifi = Engine.load(args.model, device="cuda", mode="hifi")
        hifi.synthesize(TEXTS["en"][10], context["voice"], config=GenerationConfig(seed=0))
        return hifi.backend

    if "voice" in context:
        stage("25 s", speak(TEXTS["en"][25], duration=25.0))
    if "voice" in context and not args.quick:
        stage("4 takes", speak(TEXTS["en"][10], duration=10.0, takes=4))
        stage("2 min", speak(prose(2.0)))
        if args.mode == "realtime":
            stage("check", beside)
    if args.json:
        with open(args.json, "a") as out:
            out.writelines(json.dumps(asdict(s)) + "\n" for s in stages)
    expected = 3 if args.quick else 6 if args.mode == "realtime" else 5
    return 1 if any(s.error for s in stages) or len(stages) < expected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
