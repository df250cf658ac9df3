"""How much model work one second of audio costs, and the most audio a GPU's dense rate allows for it.

    python -m tools.work_per_audio --demo --text "..." [--voice alloy] [--stream] [--steps 32] [--tflops 700]
    python -m tools.work_per_audio --demo --workload baseline [--stream] [--tflops 700] [--json PATH]

The pieces are the engine's own: `PlanningEngine` is the loaded Engine with only its generation left out, so
Engine.stream (its pieces and ahead groups, an automatic voice carried on) and Engine.render (the plan's chunks) run
as they do for a client, and each item's prompt is built by the engine's prompt builder. A piece takes
`runner.packed_rows` rows: its prompt (style, text, reference, target), then its uncond target. Every step runs
every row through every layer's linears (qkv, o, gate_up, down); the audio heads only the cond and uncond target
rows (what the unmasking scores); attention is bidirectional within each block of rows that see one another (the
prompt, the uncond target). FLOPs are counted at the released model's sizes (`ModelConfig()`), whatever checkpoint
gives the tokenizer and the codec (--demo's are the real ones); the bucket padding of the graph runner is not
counted: it is the work the layout needs, not what a bucket adds. Audio seconds are the generated frames
(25 a second), before the padding and pause removal of post-processing.

`--tflops X`: the audio seconds per second a GPU would make doing nothing but these FLOPs at X TFLOP/s (a rate
measured for dense FP16 GEMMs of these shapes): the ceiling no batching can pass.
"""
from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from app.api.voices import BUILTIN
from engine.config import GenerationConfig, ModelConfig
from engine.constants import FRAME_RATE, SAMPLE_RATE
from engine.engine import Engine, SynthesisResult, Timings
from engine.errors import SettingError
from engine.lm.plan import plan_request
from engine.lm.runner import packed_rows
from engine.request import SpeechRequest
from tools.model_options import add_model_options, load_engine
from tools.workloads import LANGUAGES, WORKLOADS, select

RELEASED_SIZES = ModelConfig()  # the released checkpoint's shapes (engine/config.py)
NO_VOICE = "none"  # an automatic voice: a stream's first piece becomes the voice of the rest


def gemm_flop(cfg: ModelConfig, rows: int, target_rows: int) -> float:
    """FLOP of the model's GEMMs in one step: every layer's linears over `rows`, the heads over `target_rows`."""
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    h, i = cfg.hidden_size, cfg.intermediate_size
    per_row = h * (q + 2 * kv) + q * h + h * 2 * i + i * h
    return 2.0 * (rows * cfg.num_layers * per_row + target_rows * h * cfg.num_codebooks * cfg.audio_vocab_size)


def attention_flop(cfg: ModelConfig, blocks: Iterable[int]) -> float:
    """FLOP of one step's attention over blocks of rows that each attend within themselves (bidirectional): per
    layer and query head, 2 L^2 head_dim for the scores (QK^T) and as many for their product with V."""
    return 4.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * sum(length * length for length in blocks)


@dataclass(frozen=True)
class Piece:
    """One generated item as the graph runner packs it."""

    call: int  # the render_many call that generated it (a stream's ahead group)
    prompt_len: int  # its prompt's positions: style, text, reference, target
    target_frames: int
    rows: int  # runner.packed_rows: the prompt, then the uncond target

    @property
    def audio_s(self) -> float:
        return self.target_frames / FRAME_RATE

    def step_flop(self, cfg: ModelConfig) -> tuple[float, float]:
        """(GEMM, attention) FLOP of this piece in one step: the heads score its cond and uncond target rows, the
        prompt and the uncond target are separate attention blocks."""
        return gemm_flop(cfg, self.rows, 2 * self.target_frames), attention_flop(cfg, (self.prompt_len,
                                                                                         self.target_frames))


class PlanningEngine(Engine):
    """`engine` without its model's work: `render_many` plans each request as Engine.render_many does and records
    every item's prompt as a Piece, handing back silent results with tokens of the item's length (a stream carries an
    automatic voice on from them); `stream` and `render` around it are the engine's own."""

    def __init__(self, engine: Engine):
        super().__init__(engine.folder, engine.lm, engine.tokenizer, engine.codec, engine.device, engine.mode,
                         engine.backend, engine.runner, engine.budget)
        self.pieces: list[Piece] = []
        self._calls = 0

    def render_many(self, requests: list[SpeechRequest], cancel: threading.Event | None = None
                    ) -> list[SynthesisResult]:
        call, self._calls = self._calls, self._calls + 1
        codebooks = self.lm.cfg.num_codebooks
        results = []
        for request in requests:
            cfg = request.config.check()
            plan = plan_request(request.with_config(cfg), cancel)
            tokens = [torch.zeros(codebooks, item.target_len, dtype=torch.long) for item in plan.items]
            for i in range(len(plan.items)):  # chunk 0's tokens are the reference of the rest (only their shape counts)
                prompt = self._prompt(plan, i, tokens[0] if plan.chunk0_is_reference and i > 0 else None)
                self.pieces.append(Piece(call, prompt.ids.shape[1], prompt.target_len, packed_rows(prompt)))
            results.append(SynthesisResult(np.zeros(0, np.float32), SAMPLE_RATE, Timings(), cfg.seed, tokens))
        return results


def planned_pieces(engine: Engine, request: SpeechRequest, stream: bool) -> list[Piece]:
    """The pieces `engine` generates for `request`: streamed (Engine.stream) or rendered whole (Engine.render)."""
    planner = PlanningEngine(engine)
    if stream:
        for _ in planner.stream(request.text, request.voice, instruct=request.instruct, language=request.language,
                                config=request.config):
            pass
    else:
        planner.render(request)
    return planner.pieces


@dataclass(frozen=True)
class Work:
    """The model work of some pieces, per second of their audio."""

    pieces: list[Piece]
    num_step: int
    sizes: ModelConfig = RELEASED_SIZES

    @property
    def audio_s(self) -> float:
        return sum(p.audio_s for p in self.pieces)

    def _per_audio_s(self, per_step: float) -> float:
        return per_step * self.num_step / self.audio_s

    @property
    def row_steps_per_audio_s(self) -> float:
        return self._per_audio_s(sum(p.rows for p in self.pieces))

    @property
    def gemm_flop_per_audio_s(self) -> float:
        return self._per_audio_s(sum(p.step_flop(self.sizes)[0] for p in self.pieces))

    @property
    def attention_flop_per_audio_s(self) -> float:
        return self._per_audio_s(sum(p.step_flop(self.sizes)[1] for p in self.pieces))

    def ceiling(self, tflops: float) -> float:
        """Audio seconds per second at `tflops` TFLOP/s doing nothing but these GEMMs and attention."""
        return tflops * 1e12 / (self.gemm_flop_per_audio_s + self.attention_flop_per_audio_s)

    def summary(self, tflops: float | None) -> dict:
        return {"pieces": len(self.pieces), "calls": len({p.call for p in self.pieces}),
                "rows": sum(p.rows for p in self.pieces), "audio_s": self.audio_s, "steps": self.num_step,
                "row_steps_per_audio_s": self.row_steps_per_audio_s,
                "gemm_tflop_per_audio_s": self.gemm_flop_per_audio_s / 1e12,
                "attention_tflop_per_audio_s": self.attention_flop_per_audio_s / 1e12,
                "tflops": tflops, "ceiling_audio_s_per_s": None if tflops is None else self.ceiling(tflops)}


def report(work: Work, tflops: float | None) -> str:
    s = work.sizes
    lines = ["| piece | call | prompt positions | target frames | packed rows | audio s |", "|---|---|---|---|---|---|"]
    lines += [f"| {i} | {p.call} | {p.prompt_len} | {p.target_frames} | {p.rows} | {p.audio_s:.2f} |"
              for i, p in enumerate(work.pieces)]
    total = work.summary(tflops)
    lines += ["", f"{total['pieces']} pieces in {total['calls']} calls: {total['rows']} packed rows, "
                  f"{total['audio_s']:.2f} s of audio, {work.num_step} steps; sizes: {s.num_layers} layers, hidden "
                  f"{s.hidden_size}, MLP {s.intermediate_size}, {s.num_heads}/{s.num_kv_heads} heads of {s.head_dim}",
              f"row-steps per audio second: {total['row_steps_per_audio_s']:.1f}",
              f"GEMM TFLOP per audio second (linears on every row, heads on the target rows): "
              f"{total['gemm_tflop_per_audio_s']:.4f}",
              f"attention TFLOP per audio second: {total['attention_tflop_per_audio_s']:.4f}"]
    if tflops is not None:
        lines.append(f"ceiling at {tflops:g} TFLOP/s: {total['ceiling_audio_s_per_s']:.1f} audio seconds per second")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_options(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the text to speak")
    source.add_argument("--workload", choices=[w.name for w in WORKLOADS],
                        help="a workload of tools/workloads.py: its text, language, duration and reference voice")
    parser.add_argument("--voice", choices=[*BUILTIN, NO_VOICE],
                        help=f"with --text: a built-in voice as the API resolves it, or {NO_VOICE} (default)")
    parser.add_argument("--stream", action="store_true", help="the pieces Engine.stream makes (else Engine.render's)")
    parser.add_argument("--steps", type=int, default=GenerationConfig.num_step)
    parser.add_argument("--tflops", type=float, help="a measured dense rate: print the ceiling it allows")
    parser.add_argument("--json", help="also write the pieces and the totals here")
    args = parser.parse_args(argv)
    if args.workload and args.voice:
        parser.error("a workload speaks in its own reference voice: --voice goes with --text")
    if args.tflops is not None and not args.tflops > 0:
        parser.error(f"--tflops must be above 0, not {args.tflops:g}")
    try:
        GenerationConfig(num_step=args.steps)
    except SettingError as err:
        parser.error(str(err))
    return args


def request_of(args: argparse.Namespace, engine: Engine) -> SpeechRequest:
    """The request of --text and --voice (a built-in name's instruct, as app/api/voices.py resolves it), or of
    --workload (its reference voice made as the benches make it, its fixed duration)."""
    if args.text is not None:
        instruct = BUILTIN.get(args.voice or NO_VOICE)
        return SpeechRequest(text=args.text, instruct=instruct, config=GenerationConfig(num_step=args.steps))
    (w,) = select(args.workload)
    voice = engine.voice_from_clip((w.reference(), SAMPLE_RATE), transcript=w.ref_text)
    return SpeechRequest(text=w.text, voice=voice, language=LANGUAGES[w.language],
                         config=GenerationConfig(num_step=args.steps, duration=w.duration))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    engine = load_engine(args, device="cpu")
    work = Work(planned_pieces(engine, request_of(args, engine), args.stream), args.steps)
    print(report(work, args.tflops))
    if args.json:
        Path(args.json).write_text(json.dumps({"pieces": [asdict(p) for p in work.pieces],
                                               "total": work.summary(args.tflops)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
