"""Static-shape execution of the unmasking loop for one or many sequences at once, replayed from CUDA
graphs captured per bucket of total rows.

Each sequence's cond and uncond rows are packed without padding between them: its prompt (positions
0..c-1), then its uncond target (positions 0..T-1); the sequences follow one another, pads at the end
attending to each other. Attention is block-diagonal, given as per-row key ranges (the fused ragged
kernel skips the blocks outside them), so no row sees another sequence. The target slots of all
sequences are concatenated along the frame axis; every step reveals, in each sequence, its own
scheduled number of its best slots (a per-sequence rank), and each slot's noise is a hash of its
sequence's key (engine/lm/noise.py): a sequence gets the same tokens in any batch as alone.

One step (embed, all layers, audio head on the target rows only, guided scoring, static-shape
per-sequence top-k, write-back) is captured per bucket; a generation is `num_step` replays with no
host sync. Per-request inputs are copied into the bucket's static buffers once (`pack`, `load`), then each step
is a `replay`; engine/lm/continuous.py drives them for a batch that sequences join and leave between steps. Scoring
settings are baked into a graph, so a graph is keyed by (bucket, scoring settings); the default settings are
captured at load, others on first use. With `eager=True` the same static algorithm runs without
graphs (CPU, debugging), which is what tests compare to the reference loop.

Steady latency: the host's work per generation is a few small copies and `num_step` graph
launches, done with Python's garbage collector paused (`collector_paused`: a collection in a process holding the
app would otherwise stall the launches for tens of ms), and `freeze_heap` after loading keeps the
collections that do run between them short.
"""
from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np
import torch

from engine.config import MAX_STEPS, GenerationConfig
from engine.lm.decode import predict_and_score
from engine.lm.model import KeyRanges, OmniVoiceLM, rope_cos_sin
from engine.lm.noise import MAX_FRAMES, class_uniforms, position_uniforms, sequence_key
from engine.lm.prompt import PromptItem

log = logging.getLogger(__name__)

# Packed rows (prompts + uncond targets + pads): at most 64 padded rows up to 1024, 128 up to 2048 (one
# sequence), then buckets for batches: 256 up to 4096, 512 up to 8192.
DEFAULT_BUCKETS = (tuple(range(128, 1025, 64)) + tuple(range(1152, 2049, 128)) + tuple(range(2304, 4097, 256))
                   + tuple(range(4608, 8193, 512)))
MAX_SEQUENCES = 64  # sequences one batch holds (the per-sequence schedule's width)


MAX_SCORE_SETTINGS = 4  # scoring settings whose graphs are kept; the least recently used beyond are dropped


def score_key(cfg: GenerationConfig) -> tuple:
    """The settings a captured step depends on (everything else is a buffer)."""
    return (cfg.guidance_scale, cfg.layer_penalty_factor, cfg.position_temperature, cfg.class_temperature)


def packed_rows(prompt: PromptItem) -> int:
    """Rows one sequence takes in the packed layout: its prompt, then its uncond target."""
    return prompt.ids.shape[1] + prompt.target_len


@dataclass
class Buffers:
    """Static inputs and state of one bucket of S rows (H = S // 2 target slots, all sequences')."""

    ids: torch.Tensor  # [1, C, S] long
    audio_mask: torch.Tensor  # [1, S] bool
    positions: torch.Tensor  # [S] long
    key_start: torch.Tensor  # [S] int32: row s attends to keys key_start[s] <= j < key_end[s]
    key_end: torch.Tensor  # [S] int32
    rows: torch.Tensor  # [2H] long: cond target rows, then uncond rows (junk row past the last slot)
    cond_cols: torch.Tensor  # [H] long: where slot t of the cond targets lives in the sequence
    uncond_cols: torch.Tensor  # [H] long
    valid: torch.Tensor  # [C, H] bool: a slot of some sequence
    tokens: torch.Tensor  # [C, H] long: current target tokens (MASK until revealed)
    slot_sequence: torch.Tensor  # [H] long: the sequence of each slot (MAX_SEQUENCES for junk)
    slot_frame: torch.Tensor  # [H] long: the slot's frame in its sequence, + start * C * MAX_FRAMES (pack)
    slot_key: torch.Tensor  # [H] long: its sequence's noise key (32 bits)
    rank_base: torch.Tensor  # [H] long: flat slots of the sequences before its own (C * their frames)
    sequence_slots: torch.Tensor  # [MAX_SEQUENCES + 2] long: sequence j's slots: [j] to [j + 1] (MAX_SEQUENCES: junk)
    schedule: torch.Tensor  # [MAX_STEPS, MAX_SEQUENCES + 1] long: slots each sequence reveals per step
    step: torch.Tensor  # [] long: step counter, advanced inside the graph

    @classmethod
    def allocate(cls, S: int, C: int, device) -> Buffers:
        H = S // 2
        z = dict(device=device)

        def longs(*shape):
            return torch.zeros(*shape, dtype=torch.long, **z)
        return cls(longs(1, C, S), torch.zeros(1, S, dtype=torch.bool, **z), longs(S),
                   torch.zeros(S, dtype=torch.int32, **z), torch.full((S,), S, dtype=torch.int32, **z),
                   longs(2 * H), longs(H), longs(H), torch.zeros(C, H, dtype=torch.bool, **z), longs(C, H),
                   torch.full((H,), MAX_SEQUENCES, dtype=torch.long, **z), longs(H), longs(H), longs(H),
                   longs(MAX_SEQUENCES + 2), longs(MAX_STEPS, MAX_SEQUENCES + 1),
                   torch.zeros((), dtype=torch.long, **z))


def pack(prompts: list[PromptItem], S: int, mask_id: int, schedules: list[list[int]], seeds: list[int],
         starts: list[int] | None = None) -> Buffers:
    """Lay out [prompt (c) | uncond target (T)] per sequence, then pads, in S rows (host-side Buffers,
    step 0); the last row is always a pad. Sequence j is at its own step starts[j] (default 0) when the
    step counter is 0: its schedule from there on, and its noise counter shifted by as many steps
    (engine/lm/continuous.py: sequences that join a running batch). A reference kept on the device
    (PromptItem.device_ref) is MASK here: `write_device_refs` puts it in once the buffers are loaded.
    Laid out in NumPy: a re-pack lays out every member again, on the thread that drives the batch, and torch's
    per-operation cost on small tensors made that ~0.2 ms a sequence."""
    C = prompts[0].ids.shape[0]
    H = S // 2
    total = sum(packed_rows(p) for p in prompts)
    if total >= S or len(prompts) > MAX_SEQUENCES:
        raise ValueError(f"{len(prompts)} sequences of {total} rows do not fit a bucket of {S}")
    junk = S - 1
    ids = np.full((1, C, S), mask_id, dtype=np.int64)
    audio_mask = np.zeros((1, S), dtype=bool)
    positions = np.zeros(S, dtype=np.int64)
    key_start, key_end = np.full(S, total, dtype=np.int32), np.full(S, S, dtype=np.int32)  # the pads' block
    cond_cols, uncond_cols = np.full(H, junk, dtype=np.int64), np.full(H, junk, dtype=np.int64)
    slot_sequence = np.full(H, MAX_SEQUENCES, dtype=np.int64)
    slot_frame, slot_key, rank_base = (np.zeros(H, dtype=np.int64) for _ in range(3))
    sched = np.zeros((MAX_STEPS, MAX_SEQUENCES + 1), dtype=np.int64)
    firsts = []
    row = slot = 0
    for j, (prompt, schedule, seed, start) in enumerate(zip(prompts, schedules, seeds, starts or [0] * len(prompts))):
        c, T = prompt.ids.shape[1], prompt.target_len
        if T > MAX_FRAMES:
            raise ValueError(f"{T} frames in one sequence: the noise counter tells {MAX_FRAMES} apart")
        prompt_ids = prompt.ids.numpy()
        ids[0, :, row:row + c] = prompt_ids
        ids[0, :, row + c:row + c + T] = prompt_ids[:, -T:]
        audio_mask[0, row:row + c] = prompt.audio_mask.numpy()
        audio_mask[0, row + c:row + c + T] = True
        positions[row:row + c] = np.arange(c)
        positions[row + c:row + c + T] = np.arange(T)
        # blocks on the diagonal: the prompt, then its uncond target (each attends to itself only)
        key_start[row:row + c], key_end[row:row + c] = row, row + c
        key_start[row + c:row + c + T], key_end[row + c:row + c + T] = row + c, row + c + T
        cond_cols[slot:slot + T] = np.arange(row + c - T, row + c)
        uncond_cols[slot:slot + T] = np.arange(row + c, row + c + T)
        slot_sequence[slot:slot + T] = j
        # the hash's counter (step * C + c) * MAX_FRAMES + frame at the counter's step is the one of its own step
        slot_frame[slot:slot + T] = np.arange(T) + start * C * MAX_FRAMES
        slot_key[slot:slot + T] = sequence_key(seed)
        rank_base[slot:slot + T] = C * slot
        firsts.append(slot)
        sched[:len(schedule) - start, j] = schedule[start:]
        row, slot = row + c + T, slot + T
    rank_base[slot:] = C * slot
    # each sequence's first slot; absent sequences have none; the junk slots run to H
    sequence_slots = np.array(firsts + [slot] * (MAX_SEQUENCES + 1 - len(prompts)) + [H], dtype=np.int64)
    valid = np.broadcast_to(np.arange(H) < slot, (C, H)).copy()
    tensors = (torch.from_numpy(a) for a in (
        ids, audio_mask, positions, key_start, key_end, np.concatenate([cond_cols, uncond_cols]), cond_cols,
        uncond_cols, valid, np.full((C, H), mask_id, dtype=np.int64), slot_sequence, slot_frame, slot_key, rank_base,
        sequence_slots, sched, np.zeros((), dtype=np.int64)))
    return Buffers(*tensors)


def read_slots(buf: Buffers, slots: torch.Tensor) -> torch.Tensor:
    """The tokens [C, n] in target `slots` (a host tensor) of `buf`. The index goes non_blocking: a blocking copy
    would wait for every step queued on the device (the host runs ahead)."""
    return buf.tokens.index_select(1, slots.to(buf.tokens.device, non_blocking=True))


def write_slots(buf: Buffers, slots: torch.Tensor, tokens: torch.Tensor) -> None:
    """Write `tokens` [C, n] into target `slots` (a host tensor) of `buf`: the tokens and their cond and uncond
    columns of the model's input."""
    slots = slots.to(buf.tokens.device, non_blocking=True)
    buf.tokens.index_copy_(1, slots, tokens)
    buf.ids[0].index_copy_(1, buf.cond_cols.index_select(0, slots), tokens)
    buf.ids[0].index_copy_(1, buf.uncond_cols.index_select(0, slots), tokens)


def write_device_refs(buf: Buffers, prompts: list[PromptItem]) -> None:
    """Write the references kept on the device (PromptItem.device_ref) into `buf`, loaded with `pack(prompts, ...)`:
    device to device, so the host waits for nothing queued before them."""
    row = 0
    for prompt in prompts:
        prompt.write_device_ref(buf.ids[0, :, row:row + prompt.ids.shape[1]])
        row += packed_rows(prompt)


@dataclass
class PackedNoise:
    """The slots' uniforms at the buffers' current step (engine/lm/noise.py)."""

    buf: Buffers

    def positions(self) -> torch.Tensor:
        b = self.buf
        return position_uniforms(b.slot_key, b.slot_frame, b.step, b.tokens.shape[0])

    def classes(self, num_classes: int) -> torch.Tensor:
        b = self.buf
        return class_uniforms(b.slot_key, b.slot_frame, b.step, b.tokens.shape[0], num_classes)


def reveal_mask(scores: torch.Tensor, buf: Buffers) -> torch.Tensor:
    """[C, H] bool: in each sequence, its scheduled number of best slots at this step.

    scores [C, H] (-inf where not revealable). Sorted by score (stable: ties keep the flat, codebook-major
    order, as topk over one sequence's [C * T]), then stably by sequence: a slot's place in its
    sequence's run is its rank there, the same as when the sequence is alone."""
    C, H = scores.shape
    flat_sequence = buf.slot_sequence.expand(C, H).flatten()  # [C * H]
    by_score = scores.flatten().argsort(descending=True, stable=True)
    order = by_score[flat_sequence[by_score].argsort(stable=True)]
    place = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
    rank = place.view(C, H) - buf.rank_base.view(1, H)  # [C, H]
    k = buf.schedule.index_select(0, buf.step.view(1))[0].index_select(0, buf.slot_sequence)  # [H]
    return rank < k.view(1, H)


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
    pinned: set[tuple] = field(default_factory=set)  # score keys captured at load: never dropped
    pool: object = None

    def __post_init__(self):
        p = next(self.lm.parameters())
        self.device, self.dtype = p.device, p.dtype
        if self.device.type != "cuda":
            self.eager = True
        cfg = self.lm.cfg
        cos, sin = rope_cos_sin(max(self.buckets), cfg.head_dim, cfg.rope_theta, self.dtype, self.device)
        self.cos_table, self.sin_table = cos, sin  # [S_max, D], precast before any capture

    @property
    def max_rows(self) -> int:
        """The most packed rows one batch may take (the largest bucket keeps one row of pad)."""
        return max(self.buckets) - 1

    def bucket_for(self, rows: int) -> int | None:
        return next((b for b in self.buckets if rows < b), None)

    def fits(self, prompt: PromptItem) -> bool:
        return self.bucket_for(packed_rows(prompt)) is not None

    # -- one step on static buffers -------------------------------------------------------------
    def _step(self, buf: Buffers, cfg: GenerationConfig) -> None:
        lm, mask_id = self.lm, self.lm.cfg.audio_mask_id
        cos, sin = self.cos_table[buf.positions], self.sin_table[buf.positions]  # [S, D]
        ranges = KeyRanges(buf.key_start, buf.key_end)
        logits = lm(buf.ids, buf.audio_mask, ranges, rows=buf.rows, rope=(cos, sin))  # [2H, C, V]
        H = buf.tokens.shape[1]
        cond, uncond = logits[:H].transpose(0, 1), logits[H:].transpose(0, 1)  # [C, H, V]
        if self.fused and cfg.class_temperature == 0:  # scoring and reveal in three kernels
            from kernels.cfg_score import cfg_score
            from kernels.reveal import noisy_scores, reveal

            predicted, scores = cfg_score(cond, uncond, cfg.guidance_scale, cfg.layer_penalty_factor, mask_id)
            noisy = noisy_scores(scores, buf.tokens, buf.valid, slot_key=buf.slot_key, slot_frame=buf.slot_frame,
                                 step=buf.step, temperature=cfg.position_temperature, mask_id=mask_id,
                                 max_frames=MAX_FRAMES)
            reveal(noisy, predicted, tokens=buf.tokens, ids=buf.ids[0], cond_cols=buf.cond_cols,
                   uncond_cols=buf.uncond_cols, sequence_slots=buf.sequence_slots, schedule=buf.schedule,
                   step=buf.step)
        else:
            predicted, scores = predict_and_score(cond, uncond, buf.tokens, cfg, mask_id, None, self.fused,
                                                  noise=PackedNoise(buf))
            reveal = reveal_mask(scores.masked_fill(~buf.valid, float("-inf")), buf)
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
        if setting in self.pinned:  # the settings captured at load keep their graphs: steady latency
            return
        self.recent_settings.pop(setting, None)
        self.recent_settings[setting] = None
        while len(self.recent_settings) > MAX_SCORE_SETTINGS:
            oldest = next(iter(self.recent_settings))
            del self.recent_settings[oldest]
            for key in [k for k in self.graphs if k[1] == oldest]:
                del self.graphs[key]

    def _capture(self, buf: Buffers, cfg: GenerationConfig) -> torch.cuda.CUDAGraph:
        # Warm up on a side stream (allocator, cuBLAS handles, autotuning), then capture one step.
        mask_id = self.lm.cfg.audio_mask_id
        buf.ids.fill_(mask_id)
        buf.tokens.fill_(mask_id)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(2):
                self._step(buf, cfg)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        # thread_local: the CUDA calls other threads make meanwhile (an audio readback's event sync, a voice's
        # tokens.cpu(), a check's model, Whisper) neither break this capture nor fail, as they would in the
        # default global mode (tools/capture_overlap.py, BENCHMARKS.md); this thread's own stay forbidden
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            self._step(buf, cfg)
        return graph

    def capture(self, cfg: GenerationConfig, progress: Callable[[float, str], None] | None = None) -> None:
        """Capture every bucket for the given scoring settings, largest first into one shared pool; these
        graphs are kept whatever else is used later."""
        self.pinned.add(score_key(cfg))
        for i, S in enumerate(sorted(self.buckets, reverse=True)):
            if progress is not None:
                progress(i / len(self.buckets), f"Capturing CUDA graph for {S} rows")
            self._graph_for(S, cfg)
        self._load_carry_kernels(cfg)
        if progress is not None:
            progress(1.0, f"Captured {len(self.buckets)} CUDA graphs")

    def _load_carry_kernels(self, cfg: GenerationConfig) -> None:
        """Carry the smallest bucket's tokens onto themselves, one slot and then all (read_slots, write_slots: what a
        running batch's re-pack does). CUDA loads a kernel on its first launch (lazy loading) and that load waits for
        the device: the first join of a process waited for every step queued before it, the later ones did not, and
        with CUDA_MODULE_LOADING=EAGER none did (H100, H200; tools/repack_host_wait.py, BENCHMARKS.md 2026-12-06).
        ATen picks its index kernels by the index's size (up to 16, more), hence both sizes. The buffers are all
        written again by the next load."""
        buf = self._graph_for(min(self.buckets), cfg).buffers
        with torch.inference_mode():
            for count in (1, buf.tokens.shape[1]):
                slots = torch.arange(count)
                write_slots(buf, slots, read_slots(buf, slots))

    def load(self, packed: Buffers, cfg: GenerationConfig) -> StepGraph:
        """The step of `packed`'s bucket for these settings, with `packed` (host-side, `pack`) copied into its
        static buffers: the step counter restarts at 0 with the rest. On a GPU the sources are pinned first: CUDA may
        make an asynchronous copy from pageable memory wait for its stream, and a 4096-row load from pageable memory
        waited for every step queued before it (H100: tests/engine/test_runner_host_wait.py fails with the pin
        planted away; a join's first wait in a process was CUDA's lazy kernel loading, `_load_carry_kernels`).
        A pinned temporary freed after its copy is not reused before the copy ran (the copy records its stream on the
        block, PyTorch's caching host allocator)."""
        entry = self._graph_for(packed.ids.shape[-1], cfg)
        pin = entry.buffers.ids.is_cuda
        for f in fields(Buffers):
            source = getattr(packed, f.name)
            getattr(entry.buffers, f.name).copy_(source.pin_memory() if pin else source, non_blocking=True)
        return entry

    def replay(self, entry: StepGraph, cfg: GenerationConfig) -> None:
        """One step of `entry`'s buffers: its graph, or the same algorithm eagerly."""
        if entry.graph is not None:
            entry.graph.replay()
        else:
            self._step(entry.buffers, cfg)


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
