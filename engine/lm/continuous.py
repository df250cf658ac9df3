"""A running batch of the graph runner that sequences join and leave at step boundaries (continuous batching).

Every sequence runs its own `num_step` steps; one that joins at the batch's step g takes its step 0 there,
while the others go on with theirs. Whenever the members change (one joins, one finishes, one is stopped) the
batch is packed anew (`runner.pack`) into the bucket that holds the members then, the step counter at 0 and each
sequence's own step given by `starts`: its schedule from there on, its noise counter shifted by as many steps. The
tokens a continuing sequence has revealed so far are carried from the old layout into the new one on the device
(its target slots and their two columns in the model's input), and so is a reference kept there (a later chunk's:
chunk 0's tokens, PromptItem.device_ref), written into every layout the sequence runs in. So a sequence gets exactly
the tokens it gets alone, whoever runs beside it and whenever it joined. The host waits for the device only to keep at
most RUN_AHEAD steps queued ahead of it (`catch_up`, engine/lm/run_ahead.py), so that one who joins starts soon.

A batch may be set aside at a step boundary (`set_aside`): its members' tokens are read out of the layout, whose
buffers another batch on the same runner may then use (starting streams that run first, engine/gather.py's
`give_way`), and its next step lays them out anew, as after a join: their tokens stay those of a solo run.

A sequence waits to join while the members and it would not fit the largest bucket or MAX_SEQUENCES; the ones
waiting join in the order they were added (none overtakes an older one). A finished sequence's tokens are handed
out at the step it finishes; it leaves the layout at the next boundary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.config import GenerationConfig
from engine.lm.decode import unmask_schedule
from engine.lm.prompt import PromptItem
from engine.lm.run_ahead import StepQueue
from engine.lm.runner import (
    MAX_SEQUENCES,
    StaticRunner,
    StepGraph,
    collector_paused,
    pack,
    packed_rows,
    read_slots,
    write_device_refs,
    write_slots,
)


@dataclass(eq=False)
class Sequence:
    """One generation in a running batch: its tokens [C, T] once its last step is done."""

    prompt: PromptItem
    seed: int
    schedule: list[int]  # slots it reveals at each of its own steps
    done: int = 0  # its own steps taken
    slot: int = -1  # its first target slot in the current layout (-1: not in it)
    stopped: bool = False
    tokens: torch.Tensor | None = None

    @property
    def finished(self) -> bool:
        return self.done == len(self.schedule)


@dataclass
class ContinuousBatch:
    """Sequences generated together on `runner` with the shared settings `cfg` (steps, schedule shape, scoring)."""

    runner: StaticRunner
    cfg: GenerationConfig
    waiting: list[Sequence] = field(default_factory=list)  # added, not in the layout yet, in the order added
    members: list[Sequence] = field(default_factory=list)  # in the layout, in the order they joined
    entry: StepGraph | None = None  # the layout's bucket (its static buffers) while members run
    changed: bool = False  # the members differ from the layout's: pack anew before the next step
    carried: dict[Sequence, torch.Tensor] = field(default_factory=dict)  # tokens [C, T] read out of the last layout
    queue: StepQueue | None = None  # its steps not yet seen done on the device

    def __post_init__(self):
        self.queue = StepQueue(self.runner.device)

    def add(self, prompt: PromptItem, seed: int) -> Sequence:
        """A sequence that joins at the next step boundary where it fits (after those added before it)."""
        if not self.runner.fits(prompt):
            raise ValueError(f"{packed_rows(prompt)} rows exceed the largest bucket ({max(self.runner.buckets)} rows)")
        C, cfg = self.runner.lm.cfg.num_codebooks, self.cfg
        sequence = Sequence(prompt, seed, unmask_schedule(prompt.target_len, C, cfg.num_step, cfg.t_shift))
        self.waiting.append(sequence)
        return sequence

    def stop(self, sequence: Sequence) -> None:
        """`sequence` leaves at the next step boundary (at once if it waits); it gets no tokens."""
        sequence.stopped = True
        if sequence in self.waiting:
            self.waiting.remove(sequence)
        self.changed |= sequence in self.members

    @property
    def idle(self) -> bool:
        """Nothing runs or waits."""
        return not self.members and not self.waiting

    def step(self) -> list[Sequence]:
        """One step of every member, after the boundary's joins and leaves: the sequences that finished at it
        (their `tokens` set, on the runner's device)."""
        with collector_paused(), torch.inference_mode():
            self._admit()
            if self.changed:
                self._repack()
            if not self.members:
                return []
            self.runner.replay(self.entry, self.cfg)
            self.queue.queued()
            finished = []
            for sequence in self.members:
                sequence.done += 1
                if sequence.finished:
                    T = sequence.prompt.target_len
                    sequence.tokens = self.entry.buffers.tokens[:, sequence.slot:sequence.slot + T].clone()
                    finished.append(sequence)
            self.changed |= bool(finished)
            return finished

    def catch_up(self) -> None:
        """Wait until the device is at most RUN_AHEAD steps behind the host (engine/lm/run_ahead.py). Call it before
        a boundary's joins and outside any lock a caller's decode needs."""
        self.queue.catch_up()

    def set_aside(self) -> None:
        """Read the members' tokens so far out of the layout, which another batch on the runner may overwrite from
        now on: the next step lays them out anew with those tokens (queued on the device, the host waits for none)."""
        if self.entry is None:
            return
        carried = [s for s in self.members if s.slot >= 0 and self._stays(s)]
        if carried:
            tokens = read_slots(self.entry.buffers, self._slots(carried))
            self.carried = dict(zip(carried, tokens.split([s.prompt.target_len for s in carried], dim=1)))
        for s in self.members:
            s.slot = -1
        self.changed, self.entry = True, None

    def _admit(self) -> None:
        """Move the waiting sequences that fit beside the members into them, oldest first."""
        rows = sum(packed_rows(s.prompt) for s in self.members if self._stays(s))
        count = sum(self._stays(s) for s in self.members)
        while self.waiting:
            more = packed_rows(self.waiting[0].prompt)
            if rows + more > self.runner.max_rows or count + 1 > MAX_SEQUENCES:
                break
            self.members.append(self.waiting.pop(0))
            rows, count, self.changed = rows + more, count + 1, True

    @staticmethod
    def _stays(sequence: Sequence) -> bool:
        return not sequence.finished and not sequence.stopped

    def _repack(self) -> None:
        """Lay out the members that stay in their bucket, each at its own step, with the tokens it has so far."""
        self.set_aside()  # read out of the old layout before the new one may overwrite its buffers
        self.members = [s for s in self.members if self._stays(s)]
        carried, self.carried, self.changed = self.carried, {}, False
        if not self.members:
            return
        prompts = [s.prompt for s in self.members]
        S = self.runner.bucket_for(sum(packed_rows(p) for p in prompts))
        packed = pack(prompts, S, self.runner.lm.cfg.audio_mask_id, [s.schedule for s in self.members],
                      [s.seed for s in self.members], starts=[s.done for s in self.members])
        slot = 0
        for s in self.members:
            s.slot, slot = slot, slot + s.prompt.target_len
        self.entry = self.runner.load(packed, self.cfg)
        write_device_refs(self.entry.buffers, prompts)  # a later chunk's reference: chunk 0's tokens, on the device
        kept = [s for s in self.members if s in carried]
        if kept:
            write_slots(self.entry.buffers, self._slots(kept), torch.cat([carried[s] for s in kept], dim=1))

    @staticmethod
    def _slots(sequences: list[Sequence]) -> torch.Tensor:
        """The target slots of `sequences` in the current layout, in their order (host)."""
        return torch.cat([torch.arange(s.slot, s.slot + s.prompt.target_len) for s in sequences])
