"""The reveal half of a runner step, PyTorch ops against the fused kernels (kernels/reveal.py), side by side:
`python -m tools.kernels.bench_reveal`.

Both on the same packed buffers, from the guided scores on (position noise at the default temperature,
masks, each sequence's rank, the write-back into tokens and ids): checked equal, then timed per call
replayed from a CUDA graph as the runner replays its step, with the kernels each launches counted (torch
profiler). Layouts: the baseline request (one sequence of 290 frames in the bucket of 896 rows) and 8
takes of it packed in one bucket (7168 rows). Needs CUDA.
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from engine.config import GenerationConfig
from engine.lm.decode import gumbel_perturb
from engine.lm.noise import MAX_FRAMES
from engine.lm.prompt import PromptItem
from engine.lm.runner import PackedNoise, pack, reveal_mask
from kernels.reveal import noisy_scores, reveal
from tools.kernels.check_realtime_gpu import graph_us

C, MASK, PROMPT_ROWS, FRAMES = 8, 1024, 315, 290  # about the baseline: 605 cond rows + 290 uncond in 896
STEP = 10
LAYOUTS = {"baseline, 1 sequence (896 rows)": (1, 896), "8 takes of it (7168 rows)": (8, 7168)}
TEMPERATURE = GenerationConfig().position_temperature


def buffers(sequences: int, S: int):
    g = torch.Generator().manual_seed(0)
    prompts = [PromptItem(torch.randint(0, MASK, (C, PROMPT_ROWS + FRAMES), generator=g),
                          torch.ones(PROMPT_ROWS + FRAMES, dtype=torch.bool), FRAMES)] * sequences
    schedules = [[C * FRAMES // 32] * 32] * sequences
    buf = pack(prompts, S, MASK, schedules, seeds=list(range(sequences)))
    buf.step.fill_(STEP)
    revealed = (torch.rand(C, S // 2, generator=g) < 0.3) & buf.valid
    buf.tokens[revealed] = 7
    buf = type(buf)(**{f: getattr(buf, f).cuda() for f in buf.__dataclass_fields__})
    scores = torch.randn(C, S // 2, generator=g).cuda()
    predicted = torch.randint(0, MASK, (C, S // 2), generator=g).cuda()
    return buf, scores, predicted


def torch_path(buf, scores, predicted, tokens, ids):
    """The runner's ops without the fused reveal (engine/lm/runner.py StaticRunner._step)."""
    noisy = gumbel_perturb(scores, TEMPERATURE, None, PackedNoise(buf).positions())
    noisy = noisy.masked_fill(buf.tokens != MASK, float("-inf"))
    chosen = reveal_mask(noisy.masked_fill(~buf.valid, float("-inf")), buf)
    tokens.copy_(torch.where(chosen, predicted, buf.tokens))
    ids.index_copy_(1, buf.cond_cols, tokens)
    ids.index_copy_(1, buf.uncond_cols, tokens)


def fused_path(buf, scores, predicted, tokens, ids):
    tokens.copy_(buf.tokens)
    noisy = noisy_scores(scores, buf.tokens, buf.valid, slot_key=buf.slot_key, slot_frame=buf.slot_frame,
                         step=buf.step, temperature=TEMPERATURE, mask_id=MASK, max_frames=MAX_FRAMES)
    reveal(noisy, predicted, tokens=tokens, ids=ids, cond_cols=buf.cond_cols, uncond_cols=buf.uncond_cols,
           sequence_slots=buf.sequence_slots,
           schedule=buf.schedule, step=buf.step)


def kernels_per_call(fn) -> int:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main() -> int:
    print(f"{'layout':<34}{'path':<10}{'us/step':>9}{'kernels':>9}{'ms per 32 steps':>17}")
    failed = False
    for name, (sequences, S) in LAYOUTS.items():
        buf, scores, predicted = buffers(sequences, S)
        outs = {}
        for label, path in (("torch", torch_path), ("fused", fused_path)):
            tokens, ids = buf.tokens.clone(), buf.ids[0].clone()
            with torch.inference_mode():
                path(buf, scores, predicted, tokens, ids)
                outs[label] = (tokens.clone(), ids.clone())
                us = graph_us(lambda _, p=path, t=tokens, i=ids: p(buf, scores, predicted, t, i))
                n = kernels_per_call(lambda p=path, t=tokens, i=ids: p(buf, scores, predicted, t, i))
            print(f"{name:<34}{label:<10}{us:>9.1f}{n:>9}{us * 32 / 1000:>17.2f}")
        same = all(torch.equal(a, b) for a, b in zip(outs["torch"], outs["fused"]))
        revealed = int((outs["fused"][0] != buf.tokens).sum())
        print(f"   same tokens and ids: {same} ({revealed} slots revealed)")
        failed |= not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
