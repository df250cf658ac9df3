"""Upstream's recorded `_generate_iterative` calls (tests/data/goldens/generate, see the README there),
one `GoldenCall` per call, with what our engine needs to replay it."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

import torch
from safetensors.torch import load_file

from engine.config import GenerationConfig
from engine.lm.prompt import PromptItem

GENERATE = Path(__file__).parents[1] / "data" / "goldens" / "generate"


@dataclass
class GoldenCall:
    name: str  # request name, with "#i" for the i-th call of a chunked request
    facts: dict  # text, ref_text, lang, instruct, target_len, cond_len, ref_len, schedule ...
    tensors: dict[str, torch.Tensor]  # this call's tensors, without the "call{i}." prefix
    config: GenerationConfig
    seed: int | None

    @property
    def prompt(self) -> PromptItem:
        """Upstream's input of this call (a seeded call, which keeps only its tokens, takes it from a
        greedy call with the same text, reference, language, instruct and lengths)."""
        t = self.tensors if "cond_input_ids" in self.tensors else _same_prompt(self).tensors
        return PromptItem(t["cond_input_ids"], t["cond_audio_mask"], self.facts["target_len"])

    @property
    def ref_tokens(self) -> torch.Tensor | None:
        """The reference codes inside upstream's prompt: [8, ref_len], or None."""
        if self.facts["ref_len"] is None:
            return None
        end = self.facts["cond_len"] - self.facts["target_len"]
        return self.prompt.ids[:, end - self.facts["ref_len"]:end]


PROMPT_FACTS = ("text", "ref_text", "lang", "instruct", "target_len", "cond_len", "ref_len")


def _same_prompt(call: GoldenCall) -> GoldenCall:
    key = [call.facts[k] for k in PROMPT_FACTS]
    same = [c for c in greedy_calls()
            if [c.facts[k] for k in PROMPT_FACTS] == key and c.config.denoise == call.config.denoise]
    assert same, f"no greedy golden call has the prompt of {call.name}"
    return same[0]


def _config(recorded: dict) -> GenerationConfig:
    ours = {f.name for f in fields(GenerationConfig)}
    return GenerationConfig(**{k: v for k, v in recorded.items() if k in ours})


@cache
def golden_requests() -> dict[str, list[GoldenCall]]:
    """Request name -> its calls in order."""
    requests = {}
    for meta_path in sorted(GENERATE.glob("*.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        tensors = load_file(str(meta_path.with_suffix(".safetensors")))
        calls = []
        for i, facts in enumerate(meta["calls"]):
            prefix = f"call{i}."
            mine = {k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)}
            name = meta_path.stem if meta["num_calls"] == 1 else f"{meta_path.stem}#{i}"
            calls.append(GoldenCall(name, facts, mine, _config(meta["generation_config"]), meta["torch_seed"]))
        requests[meta_path.stem] = calls
    return requests


def greedy_calls() -> list[GoldenCall]:
    """Every call recorded with position_temperature = 0 and a full set of tensors."""
    return [c for calls in golden_requests().values() for c in calls if c.seed is None]


def seeded_calls() -> list[GoldenCall]:
    return [c for calls in golden_requests().values() for c in calls if c.seed is not None]
