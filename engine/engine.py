"""The engine facade: the one API the app, the CLI, the benchmarks and the tests use.

`Engine.load` resolves and loads a checkpoint and sets up the chosen mode; `voice_from_clip` turns a
reference clip into a reusable Voice; `synthesize` returns a whole clip; `stream` yields it chunk by
chunk (a short first clause, then sentences) so that playback starts early. Generation follows
upstream OmniVoice's `generate()` step for step (see engine/lm/plan.py)."""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from engine.audio.io import Clip, load_clip
from engine.audio.process import cross_fade_chunks, finish_output, prepare_reference
from engine.checks.policy import CheckMode
from engine.checks.takes import Checks, checked_take
from engine.checks.verdict import Verdict
from engine.codec import AudioCodec, QueuedDecode
from engine.config import GenerationConfig, Mode, offset_seed
from engine.constants import SAMPLE_RATE
from engine.decode_graphs import decoder_for
from engine.device_span import DeviceSpan
from engine.errors import AudioInputError, Cancelled, TranscriptRequiredError
from engine.gather import Gathering, RunningBatch
from engine.lm.batch import BatchedGeneration, JoiningGeneration, shared_settings
from engine.lm.budget import MemoryBudget
from engine.lm.checkpoint import load_lm, load_text_tokenizer, resolve_checkpoint
from engine.lm.modes import pick_device, settle_cublaslt_workspace
from engine.lm.plan import Plan, plan_request
from engine.lm.prompt import PromptItem, build_prompt
from engine.request import SpeechRequest
from engine.text.chunk import stream_pieces
from engine.text.clean import add_punctuation, clean_text, require_text
from engine.text.languages import resolve_language
from engine.text.limits import MAX_TRANSCRIPT_CHARS, check_length, check_request
from engine.text.normalize import normalized_parts
from engine.text.spoken import spoken_text
from engine.voice import Voice

log = logging.getLogger(__name__)


@dataclass
class LoadProgress:
    stage: str  # download | load | codec | quantize | capture | ready
    fraction: float
    message: str


@dataclass
class Timings:
    """Wall-clock seconds of one result's way through the engine, from its call. Results made together (takes,
    a stream's group, other threads' calls in one batch) share their generation's `generate_s`: the time this
    result waited for it, not its own part of the work (summed over results, a step counts more than once).
    `text_s`: a streamed piece's, before its call: its group's text read out of the stream's (Engine.stream: for the
    first group, from the stream's call: the text checked, cleaned, normalised as far as the group reaches and cut into
    pieces; the stream's text normalised in child processes shared by all the app's streams,
    engine/text/normalize_process.py).
    `prepare_s`: the call until its batch took it in: `plan_s`, the call until it asked for a batch (its settings
    checked, its text planned: chunks, durations, tokens), then the wait for its batch (engine/gather.py: for the batch
    before, for the next step boundary of the running one, or for the other starting streams' first calls, GRACE_S at
    most). `generate_s`: from then until its call's tokens were done; on a GPU the device's
    time from its first step to its last (engine/device_span.py). `decode_s`: the rest: decoding its audio, and on a
    GPU the device finishing the work queued before its decode, and before its first step: a call that joins a running
    batch starts behind every step the host queued for the members already (the host runs ahead of the device), a wait
    that its generate_s does not hold (docs/bench/h100-issue23-clients-20261206-1710.json's third round: six calls
    joined two that had started ~1 ms before them at the batch's step 28 or later, and waited ~40 ms there)."""

    text_s: float = 0.0
    prepare_s: float = 0.0
    plan_s: float = 0.0  # of prepare_s
    generate_s: float = 0.0
    decode_s: float = 0.0
    total_s: float = 0.0
    audio_s: float = 0.0
    first_audio_s: float | None = None

    @property
    def rtf(self) -> float:
        """Real-time factor: seconds of work per second of audio (lower is faster)."""
        return self.total_s / self.audio_s if self.audio_s > 0 else float("nan")


@dataclass
class SynthesisResult:
    audio: np.ndarray  # float32 [n] at sample_rate
    sample_rate: int
    timings: Timings
    seed: int
    tokens: list[torch.Tensor] = field(default_factory=list)  # per generated chunk, [8, T]


@dataclass
class AudioChunk:
    audio: np.ndarray
    sample_rate: int
    index: int
    text: str
    is_last: bool
    timings: Timings
    seed: int | None = None
    verdict: Verdict | None = None  # the checks of this chunk's take, when checks were asked for


@dataclass
class _Planned:
    """One render_many call, checked and planned on its caller's thread: what a batch runs for it."""
    requests: list[SpeechRequest]
    cfgs: list[GenerationConfig]
    seeds: list[int]
    plans: list[Plan]
    cancel: threading.Event | None
    t0: float  # when the call came
    asked_at: float = field(default_factory=time.perf_counter)  # planned: when it asked for a batch


@dataclass
class _Generated:
    """One render_many call's tokens, as its batch hands them out."""
    tokens: list[list[torch.Tensor]]  # per request, per item: [C, T]
    began: float  # when its batch took it in (time.perf_counter())
    span: DeviceSpan  # its generation on the device: from its first step's start to its last step's end


@dataclass
class _Joining:
    """A running batch of the graph runner, as `_generate_batch` keeps it across step boundaries and hand-overs."""
    joining: JoiningGeneration
    calls: list[_Planned]  # in the batch's order (RunningBatch.calls)
    began: dict[int, tuple[float, DeviceSpan]]  # by call: when the batch took it in, and its device span

    def add(self, call: _Planned, device: torch.device) -> None:
        index = len(self.calls)
        self.calls.append(call)
        self.began[index] = time.perf_counter(), DeviceSpan(device)
        self.joining.add(index, call.plans, call.seeds)


AHEAD_MAX = 16  # streamed pieces generated together at most (the runner cuts a group further to fit)
DECODE_TOGETHER_FRAMES = 1000  # frames decoded in one batch at most (40 s of audio: a long lone piece's memory)


def ahead_groups(pieces: Iterable, checking: bool) -> Iterator[list]:
    """The streamed pieces generated together: the first alone (its audio comes as early as when pieces
    ran one by one), then groups doubling in size, each generated while the audio before it plays.
    Checked pieces go one by one (their candidates are the batch). `pieces` is read only as far as the
    group given out needs (a stream's text is normalised as its pieces are read)."""
    pieces, size = iter(pieces), 1
    while group := list(itertools.islice(pieces, size)):
        yield group
        size = 1 if checking else min(2 * size, AHEAD_MAX)


class Engine:
    def __init__(self, folder: Path, lm, tokenizer, codec: AudioCodec, device: torch.device, mode: Mode,
                 backend: str, runner=None, budget: MemoryBudget | None = None):
        self.folder, self.lm, self.tokenizer, self.codec = folder, lm, tokenizer, codec
        self.device, self.mode, self.backend, self.runner = device, mode, backend, runner
        # what one batch may take (engine/lm/budget.py)
        self.budget = budget or MemoryBudget.for_device(device, lm.cfg, next(lm.parameters()).dtype)
        self.sample_rate = SAMPLE_RATE
        self._lock = threading.Lock()  # one generation at a time on one GPU
        self._gathering = Gathering(self._generate_batch)  # render_many calls of several threads batched
        # pieces of one length decoded in one batch: on a GPU within the codec's rounding of one by one and several
        # times faster; on the CPU they stay one by one, bit-equal to lone renders
        self.decode_together = device.type == "cuda"
        # a GPU's short decodes replay CUDA graphs where memory allows (engine/decode_graphs.py): their eager launches
        # cost the host more than the device
        self._decoder = decoder_for(codec, device)

    @property
    def is_demo(self) -> bool:
        return self.lm.cfg.demo

    # -- loading --------------------------------------------------------------------------------
    @classmethod
    def load(cls, model: str | Path | None = None, device: str | torch.device = "auto",
             mode: Mode | str = Mode.HIFI, dtype: torch.dtype | None = None,
             progress: Callable[[LoadProgress], None] | None = None) -> Engine:
        """Load a checkpoint and prepare `mode` on `device`.

        Parameters
        ----------
        model : folder, hub id or None ($VOICEDESK_MODEL, else k2-fsa/OmniVoice, downloaded once).
        device : "auto", "cpu", "cuda" or "cuda:N".
        mode : eager (reference path), hifi (FP16 + CUDA graphs) or realtime (W4A4 + CUDA graphs).
            On a CPU every mode runs the eager path, in fp32; `backend` says what runs.
        dtype : override the compute dtype (default fp16 on CUDA, fp32 on CPU).
        progress : called with LoadProgress as stages advance.
        """
        report = progress or (lambda p: None)
        mode = Mode(mode)
        dev = pick_device(device)
        if dev.type == "cuda":
            settle_cublaslt_workspace()  # before the model's first GEMM
        dtype = dtype or (torch.float16 if dev.type == "cuda" else torch.float32)
        folder = resolve_checkpoint(model, lambda f, m: report(LoadProgress("download", f, m)))
        report(LoadProgress("load", 0.0, "Loading the language model"))
        lm = load_lm(folder, dev, dtype)
        budget = MemoryBudget.for_device(dev, lm.cfg, dtype)  # free memory with the weights in place
        tokenizer = load_text_tokenizer(folder)
        report(LoadProgress("codec", 0.0, "Loading the audio codec"))
        codec = AudioCodec.load(folder / "audio_tokenizer", dev)
        codec.warm_up()
        from engine.lm.modes import prepare_mode  # the fast paths live there

        runner, backend = prepare_mode(lm, mode, dev, folder, lambda stage, f, m: report(LoadProgress(stage, f, m)),
                                       budget)
        report(LoadProgress("ready", 1.0, f"Ready: {backend}"))
        return cls(folder, lm, tokenizer, codec, dev, mode, backend, runner, budget)

    # -- voices ---------------------------------------------------------------------------------
    def voice_from_clip(self, audio, transcript: str | None = None, preprocess: bool = True) -> Voice:
        """Make a Voice from a clip: a path to any audio file, or (samples, sample_rate).

        Raises AudioInputError for an unusable clip (or one cut to 60 s whose typed transcript cannot be
        redone for the part kept), TextInputError for a transcript over MAX_TRANSCRIPT_CHARS and
        TranscriptRequiredError when there is no transcript and no speech recogniser to make one.
        """
        if transcript is not None and not transcript.strip():
            transcript = None
        # with cleanup off the transcript stays as typed, as upstream (its duration estimate counts the spaces)
        check_length(transcript, MAX_TRANSCRIPT_CHARS, "transcript")
        clip = load_clip(audio)
        notes = (clip.cut_note,) if clip.truncated else ()
        typed_for_the_whole = clip.truncated and transcript is not None
        if typed_for_the_whole:  # it covers the whole recording, the audio only its start: never pair them
            transcript = None
        # a long clip is cut at a pause only when no transcript was given (it must match the audio)
        ref = prepare_reference(clip.samples, preprocess=preprocess, trim_long=transcript is None)
        if transcript is None:
            transcript = self._transcribe(ref.samples, cut=clip if typed_for_the_whole else None)
        if typed_for_the_whole:
            notes += ("The transcript you typed is for the whole recording, so the part kept was transcribed "
                      "instead.",)
        with self._lock, torch.inference_mode():
            tokens = self.codec.encode(torch.from_numpy(ref.samples).to(self.device)).cpu()  # [8, T_ref]
        if preprocess:
            transcript = add_punctuation(transcript)
        for note in notes:
            log.warning(note)
        return Voice(tokens=tokens, transcript=transcript, rms=ref.rms, notes=notes)

    def _transcribe(self, wave: np.ndarray, cut: Clip | None = None) -> str:
        """The words of `wave`; `cut`: the recording it was cut from, whose typed transcript was set aside."""
        from engine.audio.asr import transcribe

        text = transcribe(wave, SAMPLE_RATE, self.device)
        if text is None and cut is not None:
            raise AudioInputError(
                f"This recording is {cut.source_seconds:.0f} s long and a reference is cut to its first "
                f"{cut.seconds:.0f} s, so the transcript typed for all of it would not match what the model hears. "
                f"Trim the clip to at most {cut.seconds:.0f} s (3-10 s works best) and type what is said in it.")
        if text is None:
            raise TranscriptRequiredError(
                "Type what is said in the reference clip: no speech recogniser (Whisper) is installed "
                "here to do it automatically.")
        return text

    # -- synthesis ------------------------------------------------------------------------------
    # `instruct` and `language` are both optional strings: they, and what follows them, are keyword-only
    # here, and the chain below passes one SpeechRequest, so that the two can never be swapped by position.
    def synthesize(self, text: str, voice: Voice | None = None, *, instruct: str | None = None,
                   language: str | None = None, config: GenerationConfig | None = None,
                   cancel: threading.Event | None = None) -> SynthesisResult:
        """Speak `text` (in `voice`, or designed by `instruct`, or an automatic voice): whole clip."""
        return self.render(self._request(text, voice, instruct=instruct, language=language, config=config),
                           cancel=cancel)[0]

    def takes(self, text: str, voice: Voice | None = None, *, instruct: str | None = None,
              language: str | None = None, config: GenerationConfig | None = None, n: int = 1,
              cancel: threading.Event | None = None) -> list[SynthesisResult]:
        """`n` takes of `text`; take j is seeded config.seed + j (`offset_seed`) and equals `synthesize` with that
        seed."""
        return self.render(self._request(text, voice, instruct=instruct, language=language, config=config), n=n,
                           cancel=cancel)

    def render(self, request: SpeechRequest, n: int = 1,
               cancel: threading.Event | None = None) -> list[SynthesisResult]:
        """`n` takes of a request, generated together (one batched forward per step); take j is seeded
        config.seed + j (`offset_seed`: from 0 again past the largest seed) and equals a lone render with that seed
        (their timings share the generation time). Raises SettingError for a setting out of range and TextInputError
        for text over its limits."""
        seed = self._seed(request.config.check())
        return self.render_many([request.with_seed(offset_seed(seed, j)) for j in range(n)], cancel)

    def render_many(self, requests: list[SpeechRequest], cancel: threading.Event | None = None
                    ) -> list[SynthesisResult]:
        """Several requests generated together, one batched forward per step; each result equals its
        request's lone render. Their step and scoring settings must agree (`batch_key`). Calls from other
        threads made meanwhile (the worker's jobs running side by side) join the same batches
        (engine/gather.py): a call waits at most for the batch running when it came."""
        t0 = time.perf_counter()
        cfgs = [r.config.check() for r in requests]
        key = shared_settings(cfgs[0])
        if any(shared_settings(c) != key for c in cfgs):
            raise ValueError("requests generated together share their settings (but seed, duration, speed and "
                             "the handling of text and audio)")
        seeds = [self._seed(c) for c in cfgs]
        plans = [plan_request(r.with_config(c), cancel) for r, c in zip(requests, cfgs)]
        call = _Planned(requests, cfgs, seeds, plans, cancel, t0)
        generated = self._gathering.run(call, key, cancel)
        with self._gathering.completing():
            return self._render_generated(call, generated)

    def member(self):
        """A block in which this thread asks for one generation after another (a stream, a Studio render):
        other threads' batches wait for its next call and share it (engine/gather.py)."""
        return self._gathering.member()

    def batch_key(self, config: GenerationConfig) -> tuple:
        """Generations whose configs give equal keys share this engine's batches (the worker runs their jobs
        side by side, app/worker.py)."""
        return self, shared_settings(config.check())

    def _generate_batch(self, calls: list[_Planned], batch: RunningBatch) -> list[_Generated | None]:
        """One batch: the tokens of every plan of every call, generated together; the callers decode them. With the
        graph runner, calls of the batch's key join it at step boundaries (`batch.joins`) and each call's tokens are
        handed out as soon as they are done (`batch.hand_out`), a cancelled call's sequences leaving at the next
        boundary; once this thread's own call is done, another thread of the batch runs it on (`batch.hand_over`). At
        each boundary the host first waits until the device is at most RUN_AHEAD steps behind it
        (engine/lm/run_ahead.py) and lets waiting starting streams run first (`batch.give_way`, this batch's tokens set
        aside meanwhile).
        The eager path generates the calls it started with in one go."""
        if self.runner is None:
            began, span = time.perf_counter(), DeviceSpan(self.device)
            token_sets = iter(self._generate_plans([p for c in calls for p in c.plans], calls[0].cfgs[0],
                                                   [s for c in calls for s in c.seeds], batch))
            span.end()
            return [_Generated([next(token_sets) for _ in c.plans], began, span) for c in calls]
        if batch.state is None:  # a batch handed over (RunningBatch.hand_over) goes on where it was
            batch.state = _Joining(JoiningGeneration(self.runner, self.device, calls[0].cfgs[0], self._prompt), [], {})
            with self._lock:
                for call in calls:
                    batch.state.add(call, self.device)
        state = batch.state

        def set_aside() -> None:
            with self._lock:
                state.joining.set_aside()

        while True:
            state.joining.catch_up()  # outside the lock: whoever joins or runs first starts RUN_AHEAD steps behind
            batch.give_way(set_aside)  # starting streams' first calls run first, in a batch of their own
            joined = batch.joins()
            with self._lock:
                for call in joined:
                    state.add(call, self.device)
            stopped = [i for i in state.joining.jobs if batch.cancelled(i)]
            for index in stopped:
                state.joining.stop(index)
                batch.hand_out(index, error=Cancelled("Stopped."))
            if state.joining.idle:
                return [None] * len(state.calls)  # every call was handed its tokens
            if stopped and batch.hand_over():  # this thread's own call was stopped: its caller goes on now
                return [None] * len(state.calls)
            with self._lock:
                done = state.joining.step()
            for index, tokens in done:
                start, span = state.began[index]
                span.end()
                batch.hand_out(index, _Generated(tokens, start, span))
            if done and batch.hand_over():  # this thread's own call is done: another's thread runs the batch on
                return [None] * len(state.calls)

    def _render_generated(self, call: _Planned, generated: _Generated) -> list[SynthesisResult]:
        """A call's results from its tokens: decoded (on the caller's thread, while the device generates the next
        steps of its batch or the next batch) and finished."""
        made = [(request, cfg, seed, tokens)
                for request, cfg, seed, tokens in zip(call.requests, call.cfgs, call.seeds, generated.tokens)]
        waves = iter(self._decode_pieces([piece for *_, tokens in made for piece in tokens]))
        generate_s = generated.span.seconds()
        decode_s = time.perf_counter() - generated.began - generate_s
        results = []
        for request, cfg, seed, tokens in made:
            audio = self._finish([next(waves) for _ in tokens], request.voice, cfg)
            timings = Timings(prepare_s=generated.began - call.t0, plan_s=call.asked_at - call.t0,
                              generate_s=generate_s, decode_s=decode_s,
                              total_s=time.perf_counter() - call.t0, audio_s=len(audio) / SAMPLE_RATE)
            results.append(SynthesisResult(audio, SAMPLE_RATE, timings, seed, tokens))
        return results

    def stream(self, text: str, voice: Voice | None = None, *, instruct: str | None = None,
               language: str | None = None, config: GenerationConfig | None = None,
               cancel: threading.Event | None = None, checks: Checks | None = None) -> Iterator[AudioChunk]:
        """Speak `text` chunk by chunk: a short first clause (low time to first audio), then whole
        sentences. Without a reference voice, the first chunk's audio becomes the voice of the rest,
        as upstream does for long text. After the first, pieces are generated in growing groups
        (`ahead_groups`), one batched forward per step; each equals its lone render. With `checks`, each
        chunk's take is checked (and retaken or picked from several) by its policy; the chunk carries
        the verdict. With `normalize_text`, the text is normalised as far as the pieces read it
        (`normalize.normalized_parts`, exactly as the whole text at once): the first piece waits for its own
        text only, and `cancel` stops the normalisation too."""
        cfg = (config or GenerationConfig()).check()
        t0 = time.perf_counter()
        check_request(text, voice.transcript if voice is not None else None, instruct)  # before any work
        # a member from its start: other threads' batches wait for this stream's next group, to share it, and
        # streams starting together share their first batch (engine/gather.py)
        with self.member():
            if cfg.normalize_text and cfg.duration is None:  # as far as the pieces read: the first piece's text first
                parts = normalized_parts(clean_text(text), resolve_language(language), cancel)
            elif cfg.normalize_text:  # a fixed duration is shared out by the whole spoken text's length
                text = spoken_text(text, resolve_language(language), normalize=True, cancel=cancel)
                parts = [text]
            else:
                parts = [require_text(text)]
            cfg = cfg.replace(normalize_text=False)
            seed = self._seed(cfg)
            checking = checks is not None and checks.policy.mode != CheckMode.OFF
            reference = checks.checker.embed_reference(lambda: self.reference_audio(voice), SAMPLE_RATE) \
                if checking and voice else None
            first_audio_s = None
            read_from = t0  # the next group's text is read from here: at first the whole text checked and cleaned
            for group in ahead_groups(enumerate(stream_pieces(parts)), checking):
                text_s = time.perf_counter() - read_from
                requests = []
                for index, (piece, _) in group:
                    share = len(piece) / len(text)  # a fixed duration is shared out by length
                    piece_cfg = cfg.replace(seed=offset_seed(seed, index),
                                            duration=None if cfg.duration is None else cfg.duration * share)
                    requests.append(SpeechRequest(text=piece, voice=voice, instruct=instruct, language=language,
                                                  config=piece_cfg))
                if checking:
                    outcomes = [checked_take(self, requests[0], cancel=cancel, checks=checks, reference=reference)]
                else:
                    outcomes = [(result, None) for result in self.render_many(requests, cancel)]
                for (index, (piece, is_last)), (result, verdict) in zip(group, outcomes):
                    if first_audio_s is None:
                        first_audio_s = time.perf_counter() - t0
                    if voice is None and instruct is None and index == 0 and not is_last:
                        voice = Voice.of_generated(result.tokens[0], piece)
                        reference = checks.checker.embed(result.audio, SAMPLE_RATE) if checking else None
                    timings = result.timings
                    timings.first_audio_s, timings.text_s = first_audio_s, text_s
                    yield AudioChunk(result.audio, SAMPLE_RATE, index, piece, is_last, timings, result.seed, verdict)
                read_from = time.perf_counter()

    def reference_audio(self, voice: Voice) -> np.ndarray:
        """The voice's reference as the codec renders it: its tokens decoded (float32, SAMPLE_RATE)."""
        with self._lock, torch.inference_mode():
            return self.codec.decode(voice.tokens.to(self.device)).float().cpu().numpy()

    def first_step_logits(self, text: str, voice: Voice | None = None, *, instruct: str | None = None,
                          language: str | None = None, config: GenerationConfig | None = None) -> torch.Tensor:
        """fp32 logits [2, 8, T, V] of the first step (cond target rows, uncond rows): for fidelity checks."""
        plan = plan_request(self._request(text, voice, instruct=instruct, language=language, config=config))
        prompt = self._prompt(plan, 0, None)
        from engine.lm.decode import build_cfg_batch

        batch = build_cfg_batch([prompt], self.lm.cfg.audio_mask_id, self.device)
        with torch.inference_mode():
            logits = self.lm(batch.input_ids, batch.audio_mask, batch.attn_mask, rows=batch.rows).float()
        T = prompt.target_len
        return torch.stack([logits[:T], logits[T:]]).transpose(1, 2).cpu()  # [2, 8, T, V]

    # -- internals ------------------------------------------------------------------------------
    @staticmethod
    def _request(text: str, voice: Voice | None, *, instruct: str | None, language: str | None,
                 config: GenerationConfig | None) -> SpeechRequest:
        return SpeechRequest(text=text, voice=voice, instruct=instruct, language=language,
                             config=config or GenerationConfig())

    @staticmethod
    def _seed(cfg: GenerationConfig) -> int:
        return cfg.seed if cfg.seed is not None else int(torch.randint(0, 2**31 - 1, ()).item())

    def _prompt(self, plan: Plan, index: int, chunk0_tokens: torch.Tensor | None) -> PromptItem:
        """Item `index`'s prompt; `chunk0_tokens` (chunk 0's, still on the device) are its reference when its plan has
        no voice: they stay there (PromptItem.device_ref), so the thread that drives the batch never waits for them."""
        item = plan.items[index]
        return build_prompt(self.tokenizer, self.lm.cfg, item.text, item.target_len, ref_text=item.ref_text,
                            ref_tokens=item.ref_tokens, generated_ref=chunk0_tokens, language=plan.language,
                            instruct=plan.instruct, denoise=plan.denoise)

    def _generate_plans(self, plans: list[Plan], cfg: GenerationConfig, seeds: list[int],
                        cancel) -> list[list[torch.Tensor]]:
        """Tokens of every item of every plan (plan j seeded seeds[j]), in shared batches (engine/lm/batch.py)."""
        def on_step(step: int) -> None:
            if cancel is not None and cancel.is_set():
                raise Cancelled("Stopped.")

        with self._lock:
            batched = BatchedGeneration(self.lm, self.budget, self.device)
            return batched.plans(plans, cfg, seeds, self._prompt, on_step)

    def _decode_pieces(self, pieces: list[torch.Tensor]) -> list[np.ndarray]:
        """The waveforms of token pieces: with `decode_together`, pieces of one length in batches of up to
        DECODE_TOGETHER_FRAMES (a GPU's: within the codec's rounding of one by one and several times faster,
        BENCHMARKS.md), else one by one (the CPU's: bit-equal to a lone render's). Each run is read back once the next
        is queued: the device always has one to work on."""
        by_length: dict[int, list[list[int]]] = {}  # runs of piece numbers decoded together
        for i, piece in enumerate(pieces):
            length = piece.shape[-1] if self.decode_together else -1 - i
            group = by_length.setdefault(length, [[]])
            if group[-1] and (len(group[-1]) + 1) * piece.shape[-1] > DECODE_TOGETHER_FRAMES:
                group.append([])
            group[-1].append(i)
        runs = [run for group in by_length.values() for run in group]
        waves: list[np.ndarray] = [np.empty(0, np.float32)] * len(pieces)

        def read(run: list[int], decode: QueuedDecode) -> None:
            # copied out of the pinned buffers, which go back to PyTorch's pinned cache for the next run: at most
            # two runs' audio is page-locked at a time, not a whole long render's (300 MB held for 30 min)
            for i, wave in zip(run, decode.waves()):
                waves[i] = wave.numpy().copy()

        if not runs:
            return waves
        ahead = None  # the run queued last, read once the next is queued: the device always has one to work on
        for run in runs:
            with self._lock, torch.inference_mode():  # queued under the lock, waited for after it
                queued = (run, self._decoder.queue_decode([pieces[i].to(self.device) for i in run]))
            if ahead is not None:
                read(*ahead)
            ahead = queued
        read(*ahead)
        return waves

    @staticmethod
    def _finish(chunks: list[np.ndarray], voice: Voice | None, cfg: GenerationConfig) -> np.ndarray:
        """One request's decoded chunks as its audio: cross-faded, then post-processed as its config says."""
        wave = cross_fade_chunks(chunks)
        ref_rms = voice.rms if voice is not None else None
        return finish_output(wave, ref_rms, remove_pauses=cfg.postprocess_output, pad_s=cfg.pad_duration,
                             fade_s=cfg.fade_duration)
