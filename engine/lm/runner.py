"""Static-shape execution of the unmasking loop, replayed from CUDA graphs captured per length bucket.

Cond and uncond rows are packed into ONE sequence without padding between them: the prompt
(positions 0..c-1) then the uncond target (positions 0..T-1), block-diagonal attention given as
per-row key ranges (the fused attention kernel skips the blocks outside them), pads at the end
attending to each other. So the work per step is c + T rows instead of upstream's 2 * c. One
step (embed, all layers, audio head on the 2T target rows only, guided scoring, static-shape top-k
reveal, write-back) is captured per bucket; a generation is `num_step` replays with no host sync.
Per-request inputs are copied into the bucket's static buffers once. Scoring settings are baked
into a graph, so a graph is keyed by (bucket, scoring settings); the default settings are captured
at load, others on first use. With `eager=True` the same static algorithm runs without graphs
(CPU, debugging), which is what tests compare to the reference loop.

Steady latency: the host's work per generation is a few small copies and `num_step` graph
launches, done with Python's garbage collector paused (a collection in a process holding the app
would otherwise stall the launches for tens of ms), and `freeze_heap` after loading keeps the
collections that do run between them short.
"""
from __future__ import annotations

import contextlib
import gc
import logging
from dataclasses import dataclass, field, fields
from typing import Callable

import torch

from engine.config import MAX_STEPS, GenerationConfig
from engine.lm.decode import predict_and_score, unmask_schedule
from engine.lm.model import KeyRanges, OmniVoiceLM, rope_cos_sin
from engine.lm.prompt import PromptItem

log = logging.getLogger(__name__)

# Packed rows (prompt + uncond target + pads): at most 64 padded rows up to 1024, 128 above.
DEFAULT_BUCKETS = tuple(range(128, 1025, 64)) + tuple(range(1152, 2049, 128))


MAX_SCORE_SETTINGS = 4  # scoring settings whose graphs are kept; the least recently used beyond are dropped


def score_key(cfg: GenerationConfig) -> tuple:
    """The settings a captured step depends on (everything else is a buffer)."""
    return (cfg.guidance_scale, cfg.layer_penalty_factor, cfg.position_temperature, cfg.class_temperature)


@dataclass
class Buffers:
    """Static inputs and state of one bucket of S rows (H = S // 2 target slots per half)."""

    ids: torch.Tensor  # [1, C, S] long
    audio_mask: torch.Tensor  # [1, S] bool
    positions: torch.Tensor  # [S] long
    key_start: torch.Tensor  # [S] int32: row s attends to keys key_start[s] <= j < key_end[s]
    key_end: torch.Tensor  # [S] int32
    rows: torch.Tensor  # [2H] long: cond target rows, then uncond rows (junk row past T)
    cond_cols: torch.Tensor  # [H] long: where slot t of the cond target lives in the sequence
    uncond_cols: torch.Tensor  # [H] long
    valid: torch.Tensor  # [C, H] bool: slot t < T
    tokens: torch.Tensor  # [C, H] long: current target tokens (MASK until revealed)
    schedule: torch.Tensor  # [MAX_STEPS] long: slots revealed at each step
    step: torch.Tensor  # [] long: step counter, advanced inside the graph

    @classmethod
    def allocate(cls, S: int, C: int, device) -> "Buffers":
        H = S // 2
        z = dict(device=device)
        return cls(torch.zeros(1, C, S, dtype=torch.long, **z), torch.zeros(1, S, dtype=torch.bool, **z),
                   torch.zeros(S, dtype=torch.long, **z), torch.zeros(S, dtype=torch.int32, **z),
                   torch.full((S,), S, dtype=torch.int32, **z),
                   torch.zeros(2 * H, dtype=torch.long, **z), torch.zeros(H, dtype=torch.long, **z),
                   torch.zeros(H, dtype=torch.long, **z), torch.zeros(C, H, dtype=torch.bool, **z),
                   torch.zeros(C, H, dtype=torch.long, **z), torch.zeros(MAX_STEPS, dtype=torch.long, **z),
                   torch.zeros((), dtype=torch.long, **z))


def pack(prompt: PromptItem, S: int, mask_id: int, schedule: list[int]) -> Buffers:
    """Lay out [prompt (c) | uncond target (T) | pads] in S rows (host-side Buffers, step 0);
    the last row is always a pad."""
    C, c = prompt.ids.shape
    T = prompt.target_len
    H = S // 2
    if c + T >= S:
        raise ValueError(f"{c} + {T} rows do not fit a bucket of {S}")
    ids = torch.full((1, C, S), mask_id, dtype=torch.long)
    ids[0, :, :c] = prompt.ids
    ids[0, :, c:c + T] = prompt.ids[:, -T:]
    audio_mask = torch.zeros(1, S, dtype=torch.bool)
    audio_mask[0, :c] = prompt.audio_mask
    audio_mask[0, c:c + T] = True
    positions = torch.zeros(S, dtype=torch.long)
    positions[:c] = torch.arange(c)
    positions[c:c + T] = torch.arange(T)
    # three blocks on the diagonal: prompt, uncond target, pads
    bounds = torch.tensor([0, c, c + T, S], dtype=torch.int32)
    block = torch.bucketize(torch.arange(S, dtype=torch.int32), bounds[1:], right=True)  # [S] in 0..2
    key_start, key_end = bounds[block], bounds[block + 1]
    junk = S - 1
    t = torch.arange(H)
    cond_cols = torch.where(t < T, c - T + t, junk)
    uncond_cols = torch.where(t < T, c + t, junk)
    sched = torch.zeros(MAX_STEPS, dtype=torch.long)
    sched[:len(schedule)] = torch.tensor(schedule)
    return Buffers(ids, audio_mask, positions, key_start, key_end, torch.cat([cond_cols, uncond_cols]),
                   cond_cols, uncond_cols, (t < T).expand(C, H).clone(),
                   torch.full((C, H), mask_id, dtype=torch.long), sched, torch.zeros((), dtype=torch.long))


@dataclass
class StepGraph:
    graph: torch.cuda.CUDAGraph | None  # None when running eagerly
    buffers: Buffers


@dataclass
class StaticRunner:
    """Runs generations on the static packed layout, from CUDA graphs unless `eager`."""

    lm: OmniVoiceLM
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    eager: bool = False
    fused: bool = False  # Triton kernels for the scoring (the model's are set by use_fused_kernels)
    graphs: dict[tuple, StepGraph] = field(default_factory=dict)
    recent_settings: dict[tuple, None] = field(default_factory=dict)  # score keys, least recently used first
    pool: object = None

    def __post_init__(self):
        p = next(self.lm.parameters())
        self.device, self.dtype = p.device, p.dtype
        if self.device.type != "cuda":
            self.eager = True
        cfg = self.lm.cfg
        cos, sin = rope_cos_sin(max(self.buckets), cfg.head_dim, cfg.rope_theta, self.dtype, self.device)
        self.cos_table, self.sin_table = cos, sin  # [S_max, D], precast before any capture

    def bucket_for(self, rows: int) -> int | None:
        return next((b for b in self.buckets if rows < b), None)

    def fits(self, prompt: PromptItem) -> bool:
        return self.bucket_for(prompt.ids.shape[1] + prompt.target_len) is not None

    # -- one step on static buffers -------------------------------------------------------------
    def _step(self, buf: Buffers, cfg: GenerationConfig, generator: torch.Generator | None) -> None:
        lm, mask_id = self.lm, self.lm.cfg.audio_mask_id
        cos, sin = self.cos_table[buf.positions], self.sin_table[buf.positions]  # [S, D]
        ranges = KeyRanges(buf.key_start, buf.key_end)
        logits = lm(buf.ids, buf.audio_mask, ranges, rows=buf.rows, rope=(cos, sin))  # [2H, C, V]
        H = buf.tokens.shape[1]
        cond, uncond = logits[:H].transpose(0, 1), logits[H:].transpose(0, 1)  # [C, H, V]
        predicted, scores = predict_and_score(cond, uncond, buf.tokens, cfg, mask_id, generator, self.fused)
        scores = scores.masked_fill(~buf.valid, float("-inf")).flatten()  # [C * H]
        k = buf.schedule.index_select(0, buf.step.view(1))  # [1], read on the device
        order = scores.argsort(descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
        reveal = (rank < k).view_as(buf.tokens)  # exactly the k best: same set as topk(k)
        buf.tokens.copy_(torch.where(reveal, predicted, buf.tokens))
        buf.ids[0].index_copy_(1, buf.cond_cols, buf.tokens)
        buf.ids[0].index_copy_(1, buf.uncond_cols, buf.tokens)
        buf.step.add_(1)

    # -- capture and replay ---------------------------------------------------------------------
    def _graph_for(self, S: int, cfg: GenerationConfig) -> StepGraph:
        key = (S, score_key(cfg))
        self._keep_recent(key[1])
        if key in self.graphs:
            return self.graphs[key]
        buf = Buffers.allocate(S, self.lm.cfg.num_codebooks, self.device)
        entry = StepGraph(None, buf)
        if not self.eager:
            entry.graph = self._capture(buf, cfg)
        self.graphs[key] = entry
        return entry

    def _keep_recent(self, setting: tuple) -> None:
        """Mark `setting` as just used and drop every graph of the settings used least recently beyond
        MAX_SCORE_SETTINGS (guidance alone moves in 0.1 steps: one capture per setting and bucket otherwise)."""
        self.recent_settings.pop(setting, None)
        self.recent_settings[setting] = None
        while len(self.recent_settings) > MAX_SCORE_SETTINGS:
            oldest = next(iter(self.recent_settings))
            del self.recent_settings[oldest]
            for key in [k for k in self.graphs if k[1] == oldest]:
                del self.graphs[key]

    def _capture(self, buf: Buffers, cfg: GenerationConfig) -> torch.cuda.CUDAGraph:
        # Warm up on a side stream (allocator, cuBLAS handles, autotuning), then capture one step.
        # The default CUDA generator is graph-safe: each replay draws fresh philox offsets.
        mask_id = self.lm.cfg.audio_mask_id
        buf.ids.fill_(mask_id)
        buf.tokens.fill_(mask_id)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(2):
                self._step(buf, cfg, None)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self.pool):
            self._step(buf, cfg, None)
        return graph

    def capture(self, cfg: GenerationConfig, progress: Callable[[float, str], None] | None = None) -> None:
        """Capture every bucket for the given scoring settings, largest first into one shared pool."""
        for i, S in enumerate(sorted(self.buckets, reverse=True)):
            if progress is not None:
                progress(i / len(self.buckets), f"Capturing CUDA graph for {S} rows")
            self._graph_for(S, cfg)
        if progress is not None:
            progress(1.0, f"Captured {len(self.buckets)} CUDA graphs")

    def generate(self, prompt: PromptItem, cfg: GenerationConfig, generator: torch.Generator | None = None,
                 on_step: Callable[[int], None] | None = None) -> torch.Tensor:
        """Tokens [C, T] of one prompt. The caller checks `fits(prompt)` first."""
        C = self.lm.cfg.num_codebooks
        T = prompt.target_len
        S = self.bucket_for(prompt.ids.shape[1] + T)
        entry = self._graph_for(S, cfg)
        schedule = unmask_schedule(T, C, cfg.num_step, cfg.t_shift)
        with collector_paused(), torch.inference_mode():
            packed = pack(prompt, S, self.lm.cfg.audio_mask_id, schedule)
            buf = entry.buffers
            for f in fields(Buffers):  # the step counter restarts at 0 with the rest
                getattr(buf, f.name).copy_(getattr(packed, f.name), non_blocking=True)
            for step in range(cfg.num_step):
                if on_step is not None:
                    on_step(step)
                if entry.graph is not None:
                    entry.graph.replay()
                else:
                    self._step(buf, cfg, generator)
            return buf.tokens[:, :T].clone()


def freeze_heap() -> None:
    """Exempt every object alive now (a loaded model, its graphs, the app) from later collections, so
    that one scans only what came after: a few ms instead of tens in a process holding the app.
    Objects an earlier call froze are released first: a replaced engine's cycles can still be freed."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for the block (the objects it would find wait for the
    next collection): keeps collection pauses out of the host's launch sequence."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
