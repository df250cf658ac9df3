"""One item's model input, as upstream `_prepare_inference_inputs` lays it out:

    [style: <|denoise|>? <|lang_start|>lang<|lang_end|> <|instruct_start|>instruct<|instruct_end|>]
    [text:  <|text_start|> combine(ref_text, text) <|text_end|>]   (text ids repeated on every codebook row)
    [reference audio tokens]  [MASK x T]                           (audio_mask True from the reference on)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.text.clean import combine_text
from engine.text.tokens import encode_text


@dataclass
class PromptItem:
    """ids [C, L] and audio_mask [L] of one item; its last `target_len` positions are the target."""

    ids: torch.Tensor  # [C, L] long
    audio_mask: torch.Tensor  # [L] bool
    target_len: int


def style_text(language: str | None, instruct: str | None, denoise: bool) -> str:
    """The style prefix. `<|denoise|>` goes in only when the caller has a reference clip."""
    prefix = "<|denoise|>" if denoise else ""
    return (f"{prefix}<|lang_start|>{language or 'None'}<|lang_end|>"
            f"<|instruct_start|>{instruct or 'None'}<|instruct_end|>")


def build_prompt(tokenizer, cfg: ModelConfig, text: str, target_len: int, *, ref_text: str | None = None,
                 ref_tokens: torch.Tensor | None = None, language: str | None = None,
                 instruct: str | None = None, denoise: bool = True) -> PromptItem:
    """The input of one item.

    `language` is a resolved language id (or None), `instruct` a canonical instruct string (or
    None), `ref_tokens` the reference clip's codes [C, T_ref] (or None: no reference).
    """
    has_ref = ref_tokens is not None
    style_ids = tokenizer(style_text(language, instruct, denoise and has_ref))["input_ids"]
    text_ids = encode_text(tokenizer, f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>")
    text_part = torch.tensor(style_ids + text_ids, dtype=torch.long).expand(cfg.num_codebooks, -1)  # [C, N]
    audio_parts = [ref_tokens.to(torch.long).cpu()] if has_ref else []
    audio_parts.append(torch.full((cfg.num_codebooks, target_len), cfg.audio_mask_id, dtype=torch.long))
    ids = torch.cat([text_part, *audio_parts], dim=1)  # [C, L]
    audio_mask = torch.zeros(ids.shape[1], dtype=torch.bool)
    audio_mask[text_part.shape[1]:] = True
    return PromptItem(ids, audio_mask, target_len)
