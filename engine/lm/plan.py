"""From a request (SpeechRequest: text, voice, instruct, language, settings) to the list of generation items,
exactly as upstream OmniVoice's `_preprocess_all` + `_generate_chunked` decide them: resolved
language and instruct, target lengths (estimated, or fixed by `duration`), and for long text the
chunks (each with the reference prompt, or without a reference with chunk 0 as the reference)."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from engine.config import GenerationConfig
from engine.errors import TextInputError
from engine.request import SpeechRequest
from engine.text.chunk import chunk_text_for_duration
from engine.text.clean import has_chinese
from engine.text.duration import FRAME_RATE, estimate_target_tokens, plan_target_tokens
from engine.text.instruct import canonical_instruct
from engine.text.languages import resolve_language
from engine.text.limits import check_request
from engine.text.spoken import spoken_text
from engine.voice import Voice

# Upstream makes at most 30 s in one piece before it chunks long text; an item longer than this can
# only come from a fixed duration or a bad transcript, and its memory grows with the square.
MAX_ITEM_SECONDS = 60


@dataclass
class PlanItem:
    text: str
    target_len: int
    ref_text: str | None
    ref_tokens: torch.Tensor | None  # [8, T_ref], or None (no reference, or chunk 0's output)


@dataclass
class Plan:
    items: list[PlanItem]
    language: str | None
    instruct: str | None
    denoise: bool
    chunk0_is_reference: bool  # no voice and chunked: chunks 1.. use chunk 0's tokens and text


def plan_request(request: SpeechRequest, cancel: threading.Event | None = None) -> Plan:
    """The generation items for a request. Raises TextInputError for text over its limits, and for a
    request that would need one item longer than MAX_ITEM_SECONDS (memory grows with its square);
    Cancelled as soon as `cancel` is set while its text is normalised (a long text's takes seconds)."""
    voice, cfg = request.voice, request.config
    check_request(request.text, voice.transcript if voice is not None else None, request.instruct)
    plan = _plan(request.text, voice, instruct=request.instruct, language=request.language, cfg=cfg, cancel=cancel)
    longest = max(item.target_len for item in plan.items) / FRAME_RATE
    if longest > MAX_ITEM_SECONDS:
        if cfg.duration is not None:
            cause = f"the fixed duration ({cfg.duration:g} s) is far too long for this text: leave it at 0 (automatic)"
        elif voice is not None:
            cause = ("the voice's transcript is much shorter than what is said in its clip: make the voice again "
                     "with everything that is said typed in")
        else:
            cause = "the speed is too slow"
        raise TextInputError(f"One part of this text would last {longest:.0f} s (at most {MAX_ITEM_SECONDS} s "
                             f"can be made in one piece): {cause}.")
    return plan


def _plan(text: str, voice: Voice | None, *, instruct: str | None, language: str | None,
          cfg: GenerationConfig, cancel: threading.Event | None) -> Plan:
    lang = resolve_language(language)
    # estimates follow the spoken form, as upstream
    text = spoken_text(text, lang, normalize=cfg.normalize_text, cancel=cancel)
    instruct = canonical_instruct(instruct, use_zh=has_chinese(text)) if instruct else None
    ref_text = voice.transcript if voice is not None else None
    ref_tokens = voice.tokens if voice is not None else None
    ref_frames = ref_tokens.shape[-1] if ref_tokens is not None else None
    target_len, chunk_speed = plan_target_tokens(text, ref_text, ref_frames, cfg.speed, cfg.duration)
    denoise = cfg.denoise
    threshold = int(cfg.audio_chunk_threshold * FRAME_RATE)
    if cfg.audio_chunk_duration <= 0 or target_len <= threshold:
        return Plan([PlanItem(text, target_len, ref_text, ref_tokens)], lang, instruct, denoise, False)
    chunks = chunk_text_for_duration(text, target_len, cfg.audio_chunk_duration)
    if voice is not None:
        items = [PlanItem(c, estimate_target_tokens(c, ref_text, ref_frames, chunk_speed), ref_text, ref_tokens)
                 for c in chunks]
        return Plan(items, lang, instruct, denoise, False)
    first = PlanItem(chunks[0], estimate_target_tokens(chunks[0], None, None, chunk_speed), None, None)
    # later chunks take chunk 0's output (length first.target_len) as their reference
    rest = [PlanItem(c, estimate_target_tokens(c, chunks[0], first.target_len, chunk_speed), chunks[0], None)
            for c in chunks[1:]]
    return Plan([first, *rest], lang, instruct, denoise, True)
