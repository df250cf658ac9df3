"""The scoring kernels of a runner step, a baseline tree's against this tree's, side by side:
`python -m tools.kernels.bench_scoring --baseline DIR` (DIR: a checkout whose kernels/cfg_score.py and
kernels/reveal.py are the old ones, e.g. main's).

For each layout, on the same inputs: first checked equal (cfg_score's tokens and fp32 scores bit for bit, on random
logits and on tied ones; the reveal's tokens and ids at several steps, with position noise and without, whose ties
then decide), then timed per call replayed from a CUDA graph (as the runner replays its step). Layouts as the runner
packs them, fp16 logits [C, H, V] sliced from the head's [2H, C, V]: a lone first piece (62 frames, bucket 192), the
baseline request (290 frames, bucket 896) and 8 first pieces packed in one bucket (1536). Needs CUDA.
"""
import argparse
import importlib.util
import sys
from pathlib import Path

import torch

from engine.lm.noise import MAX_FRAMES
from engine.lm.prompt import PromptItem
from engine.lm.runner import pack
from kernels import cfg_score as new_cfg_score
from kernels import reveal as new_reveal
from tools.kernels.check_realtime_gpu import graph_us

C, V, MASK, GUIDANCE, PENALTY = 8, 1025, 1024, 2.0, 5.0
LAYOUTS = {  # target frames of each sequence, prompt rows of each, bucket rows
    "first piece, 62 frames (192 rows)": ([62], 59, 192),
    "baseline, 290 frames (896 rows)": ([290], 315, 896),
    "8 first pieces, 8 x 62 (1536 rows)": ([62] * 8, 59, 1536),
}
STEPS = (0, 10, 31)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the checks run in Triton's interpreter too (tests)


def load_baseline(root: Path, name: str):
    """kernels/<name>.py of the tree at `root` as a module of its own (it imports this tree's kernels helpers)."""
    spec = importlib.util.spec_from_file_location(f"baseline_{name}", root / "kernels" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def logits(H: int, seed: int, tied: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """cond and uncond [C, H, V] fp16, slices of one [2H, C, V] head output as the runner's."""
    g = torch.Generator().manual_seed(seed)
    out = (4 * torch.randn(2 * H, C, V, generator=g)).half()
    if tied:  # few distinct values: ties for the argmax and equal maxima
        out = (out / 4).round().clamp(-2, 2)
    out = out.to(DEVICE)
    return out[:H].transpose(0, 1), out[H:].transpose(0, 1)


def buffers(frames: list[int], prompt_rows: int, S: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    prompts = [PromptItem(torch.randint(0, MASK, (C, prompt_rows + T), generator=g),
                          torch.ones(prompt_rows + T, dtype=torch.bool), T) for T in frames]
    schedules = [[C * T // 32 + 1] * 32 for T in frames]
    buf = pack(prompts, S, MASK, schedules, seeds=list(range(len(frames))))
    H = buf.tokens.shape[1]
    revealed = (torch.rand(C, H, generator=g) < 0.3) & buf.valid
    buf.tokens[revealed] = 7
    return type(buf)(**{f: getattr(buf, f).to(DEVICE) for f in buf.__dataclass_fields__})


def reveal_call(module, buf, noisy, predicted, tokens, ids):
    module.reveal(noisy, predicted, tokens=tokens, ids=ids, cond_cols=buf.cond_cols, uncond_cols=buf.uncond_cols,
                  sequence_slots=buf.sequence_slots, schedule=buf.schedule, step=buf.step)


def same_scores(old, H: int) -> bool:
    """cfg_score of `old` and of this tree give the same tokens and the same score bits (random and tied logits)."""
    for seed, tied in ((0, False), (1, True)):
        cond, uncond = logits(H, seed, tied)
        a = old.cfg_score(cond, uncond, GUIDANCE, PENALTY, MASK)
        b = new_cfg_score.cfg_score(cond, uncond, GUIDANCE, PENALTY, MASK)
        if not (torch.equal(a[0], b[0]) and torch.equal(a[1].view(torch.int32), b[1].view(torch.int32))):
            return False
    return True


def same_reveals(old, buf, predicted) -> bool:
    """The reveal of `old` and of this tree give the same tokens and ids, at several steps, with and without noise."""
    H = buf.tokens.shape[1]
    for step in STEPS:
        buf.step.fill_(step)
        for temperature, scores in ((5.0, torch.randn(C, H, device=DEVICE)),
                                    (0.0, torch.randint(-3, 3, (C, H), device=DEVICE).float())):
            noisy = new_reveal.noisy_scores(scores, buf.tokens, buf.valid, slot_key=buf.slot_key,
                                            slot_frame=buf.slot_frame, step=buf.step, temperature=temperature,
                                            mask_id=MASK, max_frames=MAX_FRAMES)
            outs = []
            for module in (old, new_reveal):
                tokens, ids = buf.tokens.clone(), buf.ids[0].clone()
                reveal_call(module, buf, noisy, predicted, tokens, ids)
                outs.append((tokens, ids))
            if not all(torch.equal(a, b) for a, b in zip(*outs)):
                return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a tree with the old kernels (e.g. main)")
    args = parser.parse_args()
    old_score, old_reveal = load_baseline(args.baseline, "cfg_score"), load_baseline(args.baseline, "reveal")
    print(f"{'layout':<38}{'kernel':<11}{'equal':>7}{'old us':>9}{'new us':>9}{'new/old':>9}")
    failed = False
    for name, (frames, prompt_rows, S) in LAYOUTS.items():
        buf = buffers(frames, prompt_rows, S, seed=0)
        H = S // 2
        cond, uncond = logits(H, seed=2)
        predicted = torch.randint(0, MASK, (C, H), device=DEVICE)
        buf.step.fill_(10)
        noisy = new_reveal.noisy_scores(torch.randn(C, H, device=DEVICE), buf.tokens, buf.valid,
                                        slot_key=buf.slot_key, slot_frame=buf.slot_frame, step=buf.step,
                                        temperature=5.0, mask_id=MASK, max_frames=MAX_FRAMES)
        tokens, ids = buf.tokens.clone(), buf.ids[0].clone()
        rows = {
            "cfg_score": (same_scores(old_score, H),
                          [lambda _, m=m: m.cfg_score(cond, uncond, GUIDANCE, PENALTY, MASK)
                           for m in (old_score, new_cfg_score)]),
            "reveal": (same_reveals(old_reveal, buf, predicted),
                       [lambda _, m=m: reveal_call(m, buf, noisy, predicted, tokens, ids)
                        for m in (old_reveal, new_reveal)]),
        }
        for kernel, (equal, (old_call, new_call)) in rows.items():
            with torch.inference_mode():
                old_us, new_us = graph_us(old_call), graph_us(new_call)
            print(f"{name:<38}{kernel:<11}{str(equal):>7}{old_us:>9.1f}{new_us:>9.1f}{new_us / old_us:>9.2f}")
            failed |= not equal
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
