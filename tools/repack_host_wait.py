"""Does the host wait for queued graph replays when a running batch re-packs (engine/lm/continuous.py)?

    python -m tools.repack_host_wait --model FOLDER [--queued 30] [--json OUT.json]

CUDA documents that an asynchronous copy from pageable host memory may synchronize with the stream: if the runner's
`load` (the packed layout copied into a bucket's static buffers, `non_blocking=True` from pageable tensors) or the
re-pack's small index copy waited for every step already queued, the host would stop running ahead at each join or
leave. Each trial queues `--queued` replays of a large bucket, records an event after them, then times one host
action; if the event had completed when the action returned, the action waited for the device. Actions: nothing; a
blocking small copy (waits by definition: the control); `load` of a pageable pack (as the engine does); of a pinned
pack; pin then load; a small pageable non_blocking index copy (as the re-pack's); and ContinuousBatch.step with a join
(admit + re-pack + carried tokens + replay). Two rounds, both kept (`first`, `steady`): the first pays for lazy
set-up (the pinned cache, kernels CUDA loads on their first launch), which a process's first join meets too.
Random weights (`python -m tools.make_checkpoint --full FOLDER`); needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import torch

BUCKETS = (1024, 2048, 4096)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a checkpoint folder (random weights at the true sizes)")
    parser.add_argument("--queued", type=int, default=30, help="graph replays queued before each action")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.queued < 1:
        parser.error("--queued must be positive")
    return args


class Probe:
    def __init__(self, folder: Path, queued: int):
        from engine.config import GenerationConfig
        from engine.lm.checkpoint import load_lm, load_text_tokenizer
        from engine.lm.runner import StaticRunner

        self.device, self.queued = torch.device("cuda"), queued
        self.lm, self.tokenizer = load_lm(folder, self.device, torch.float16), load_text_tokenizer(folder)
        self.lm.use_fused_kernels()
        self.runner = StaticRunner(self.lm, buckets=BUCKETS, fused=True)
        self.cfg = GenerationConfig()
        self.runner.capture(self.cfg)
        self.generator = torch.Generator().manual_seed(0)
        self.results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "queued": queued}

    def prompt(self, frames: int):
        from engine.lm.prompt import build_prompt

        reference = torch.randint(0, 1024, (self.lm.cfg.num_codebooks, 150), generator=self.generator)
        return build_prompt(self.tokenizer, self.lm.cfg, "Some words to say here, in a sentence of a few words.",
                            frames, ref_text="A short reference.", ref_tokens=reference, language="en")

    def packed(self, prompts: list):
        from engine.lm.decode import unmask_schedule
        from engine.lm.runner import pack, packed_rows

        cfg, C = self.cfg, self.lm.cfg.num_codebooks
        rows = self.runner.bucket_for(sum(packed_rows(p) for p in prompts))
        schedules = [unmask_schedule(p.target_len, C, cfg.num_step, cfg.t_shift) for p in prompts]
        return pack(prompts, rows, self.lm.cfg.audio_mask_id, schedules, list(range(len(prompts))))

    @staticmethod
    def pinned(buffers):
        return type(buffers)(*[getattr(buffers, f.name).pin_memory() for f in fields(buffers)])

    def trial(self, round_: str, name: str, action: Callable[[], object], queue: Callable[[], object]) -> None:
        with torch.inference_mode():
            torch.cuda.synchronize()
            queue()
            mark = torch.cuda.Event()
            mark.record()
            start = time.perf_counter()
            action()
            host_ms = (time.perf_counter() - start) * 1e3
            waited = mark.query()  # the queued replays had finished when the action returned
            torch.cuda.synchronize()
        self.results.setdefault(round_, {})[name] = {"host_ms": round(host_ms, 3), "waited_for_the_device": waited}
        print(round_, name, self.results[round_][name], flush=True)

    def run(self) -> dict:
        from engine.lm.continuous import ContinuousBatch

        runner, cfg = self.runner, self.cfg
        big, small = [self.prompt(250) for _ in range(5)], [self.prompt(200) for _ in range(2)]
        with torch.inference_mode():
            entry = runner.load(self.packed(big), cfg)

        def replays():
            for _ in range(self.queued):
                runner.replay(entry, cfg)

        with torch.inference_mode():
            torch.cuda.synchronize()
            start = time.perf_counter()
            replays()
            torch.cuda.synchronize()
        self.results["queued_device_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        small_packed = self.packed(small)
        small_pinned = self.pinned(small_packed)
        self.results["bucket"], self.results["small_bucket"] = entry.buffers.ids.shape[-1], small_packed.ids.shape[-1]
        for round_ in ("first", "steady"):
            self.trial(round_, "nothing", lambda: None, replays)
            self.trial(round_, "blocking_small_copy", lambda: torch.arange(1000).to(self.device), replays)
            self.trial(round_, "load_pageable", lambda: runner.load(small_packed, cfg), replays)
            self.trial(round_, "load_pinned", lambda: runner.load(small_pinned, cfg), replays)
            self.trial(round_, "pin_then_load", lambda: runner.load(self.pinned(small_packed), cfg), replays)
            self.trial(round_, "index_copy_nonblocking", lambda: torch.arange(4000).to(self.device, non_blocking=True),
                       replays)
            batch = ContinuousBatch(runner, cfg)
            for p in big[:4]:
                batch.add(p, 7)
            with torch.inference_mode():
                batch.step()

            def steps():
                for _ in range(self.queued // 2):
                    batch.step()
            self.trial(round_, "continuous_join_step", lambda: (batch.add(small[0], 9), batch.step()), steps)
        return self.results


def main(argv: list[str]) -> int:
    args = parse(argv)
    if not torch.cuda.is_available():
        print("repack_host_wait needs a CUDA GPU", file=sys.stderr)
        return 2
    results = Probe(Path(args.model), args.queued).run()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
