"""One item's model input, as upstream `_prepare_inference_inputs` lays it out:

    [style: <|denoise|>? <|lang_start|>lang<|lang_end|> <|instruct_start|>instruct<|instruct_end|>]
    [text:  <|text_start|> combine(ref_text, text) <|text_end|>]   (text ids repeated on every codebook row)
    [reference audio tokens]  [MASK x T]                           (audio_mask True from the reference on)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.config import ModelConfig
from engine.text.clean import combine_text
from engine.text.tokens import encode_text, encode_whole


@dataclass
class PromptItem:
    """ids [C, L] and audio_mask [L] of one item, on the host; its last `target_len` positions are the target.

    A reference generated on the device (chunk 0 of a text without a voice, the reference of its later chunks) stays
    there as `device_ref`, the positions just before the target: `ids` hold MASK in them, and whoever puts the ids on
    the device writes it in (`write_device_ref`). Reading it to the host would wait for every step queued on the device
    before it: the running batch's other members would stall (engine/lm/batch.py)."""

    ids: torch.Tensor  # [C, L] long
    audio_mask: torch.Tensor  # [L] bool
    target_len: int
    device_ref: torch.Tensor | None = None  # [C, T_ref] long, on the device

    def write_device_ref(self, ids: torch.Tensor) -> None:
        """Write `device_ref` (if any) into `ids` [C, L]: this prompt's ids on the device (device to device)."""
        if self.device_ref is not None:
            end = self.ids.shape[1] - self.target_len
            ids[:, end - self.device_ref.shape[1]:end] = self.device_ref


def style_text(language: str | None, instruct: str | None, denoise: bool) -> str:
    """The style prefix. `<|denoise|>` goes in only when the caller has a reference clip."""
    prefix = "<|denoise|>" if denoise else ""
    return (f"{prefix}<|lang_start|>{language or 'None'}<|lang_end|>"
            f"<|instruct_start|>{instruct or 'None'}<|instruct_end|>")


def build_prompt(tokenizer, cfg: ModelConfig, text: str, target_len: int, *, ref_text: str | None = None,
                 ref_tokens: torch.Tensor | None = None, generated_ref: torch.Tensor | None = None,
                 language: str | None = None, instruct: str | None = None, denoise: bool = True) -> PromptItem:
    """The input of one item.

    `language` is a resolved language id (or None), `instruct` a canonical instruct string (or
    None), `ref_tokens` the reference clip's codes [C, T_ref] (or None: no reference), or else `generated_ref` a
    generated chunk's [C, T_ref] as its reference, left on its device (`PromptItem.device_ref`).
    """
    if ref_tokens is not None and generated_ref is not None:
        raise ValueError("one reference: a clip's tokens or a generated chunk's")
    has_ref = ref_tokens is not None or generated_ref is not None
    style_ids = encode_whole(tokenizer, style_text(language, instruct, denoise and has_ref))
    text_ids = encode_text(tokenizer, f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>")
    N = len(style_ids) + len(text_ids)
    ref_len = ref_tokens.shape[1] if ref_tokens is not None else generated_ref.shape[1] if has_ref else 0
    # laid out in NumPy (torch's per-operation cost on small tensors was most of a prompt's 0.25 ms, paid under the
    # engine's lock by the thread that drives the running batch); a generated reference's columns hold MASK here
    ids = np.full((cfg.num_codebooks, N + ref_len + target_len), cfg.audio_mask_id, dtype=np.int64)  # [C, L]
    ids[:, :N] = style_ids + text_ids
    if ref_tokens is not None:
        ids[:, N:N + ref_len] = ref_tokens.cpu().numpy()
    audio_mask = np.zeros(ids.shape[1], dtype=bool)
    audio_mask[N:] = True
    device_ref = generated_ref.to(torch.long) if generated_ref is not None else None
    return PromptItem(torch.from_numpy(ids), torch.from_numpy(audio_mask), target_len, device_ref)
