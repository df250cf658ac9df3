"""The things `bench` compares: our engine in each mode, our fp32 eager reference, and upstream
OmniVoice (eager FP16) when it is importable — all behind one small interface."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from engine.config import MODE_NAMES, GenerationConfig
from tools.workloads import LANGUAGES, SAMPLE_RATE, Workload

ROOT = Path(__file__).resolve().parent.parent


def deterministic_config(w: Workload) -> GenerationConfig:
    """Settings under which every path must produce the same tokens up to rounding."""
    return GenerationConfig(duration=w.duration, position_temperature=0.0, seed=0)


def timing_config(w: Workload) -> GenerationConfig:
    return GenerationConfig(duration=w.duration, seed=0)


class ModeUnderTest:
    name: str
    backend: str
    device: torch.device
    sample_rate = SAMPLE_RATE
    load_s = 0.0
    capture_s: float | None = None
    resident_bytes = 0  # GPU memory the mode keeps allocated (weights, graphs, buffers)

    def prepare(self, w: Workload):
        raise NotImplementedError

    def generate(self, w: Workload, prompt) -> np.ndarray:
        raise NotImplementedError

    def first_audio(self, w: Workload, prompt) -> float | None:
        return None

    def deterministic(self, w: Workload, prompt) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
        """(tokens [8, T], audio, step-0 logits [2, 8, T, V] of cond-target and uncond rows)."""
        raise NotImplementedError


class EngineMode(ModeUnderTest):
    def __init__(self, name: str, model: str, device: str, mode: str, dtype: torch.dtype | None = None):
        from engine.engine import Engine

        stages: dict[str, float] = {}
        before = _allocated()
        t0 = time.perf_counter()
        self.engine = Engine.load(model, device=device, mode=mode, dtype=dtype,
                                  progress=lambda p: stages.setdefault(p.stage, time.perf_counter()))
        self.load_s = time.perf_counter() - t0
        self.resident_bytes = _allocated() - before
        if "capture" in stages:
            self.capture_s = time.perf_counter() - stages["capture"]
        self.name, self.backend, self.device = name, self.engine.backend, self.engine.device

    def prepare(self, w):
        return self.engine.voice_from_clip((w.reference(), SAMPLE_RATE), transcript=w.ref_text)

    def generate(self, w, voice):
        return self.engine.synthesize(w.text, voice=voice, language=LANGUAGES[w.language],
                                      config=timing_config(w)).audio

    def first_audio(self, w, voice):
        t0 = time.perf_counter()
        for chunk in self.engine.stream(w.text, voice=voice, language=LANGUAGES[w.language], config=timing_config(w)):
            return time.perf_counter() - t0
        return None

    def deterministic(self, w, voice):
        cfg = deterministic_config(w)
        result = self.engine.synthesize(w.text, voice=voice, language=LANGUAGES[w.language], config=cfg)
        logits = self.engine.first_step_logits(w.text, voice=voice, language=LANGUAGES[w.language], config=cfg)
        return result.tokens[0], result.audio, logits


class UpstreamMode(ModeUnderTest):
    """Upstream OmniVoice 0.2.1, PyTorch eager FP16, loaded from the same checkpoint folder."""

    name = "upstream"

    def __init__(self, model: str, device: str):
        from omnivoice import OmniVoice

        t0 = time.perf_counter()
        before = _allocated()
        self.device = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                                   ("cpu" if device == "auto" else device))
        dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        self.model = OmniVoice.from_pretrained(model, device_map=str(self.device), dtype=dtype).eval()
        self.load_s = time.perf_counter() - t0
        self.resident_bytes = _allocated() - before
        self.backend = f"upstream omnivoice eager {str(dtype).removeprefix('torch.')}"

    def prepare(self, w):
        ref = torch.from_numpy(w.reference())[None]
        with torch.inference_mode():
            return self.model.create_voice_clone_prompt(ref_audio=(ref, SAMPLE_RATE), ref_text=w.ref_text)

    def _generate(self, w, prompt, cfg: GenerationConfig):
        kwargs = dict(num_step=cfg.num_step, guidance_scale=cfg.guidance_scale,
                      position_temperature=cfg.position_temperature)
        with torch.inference_mode():
            return self.model.generate(text=w.text, language=LANGUAGES[w.language], voice_clone_prompt=prompt,
                                       duration=cfg.duration, **kwargs)[0]

    def generate(self, w, prompt):
        return self._generate(w, prompt, timing_config(w))

    def deterministic(self, w, prompt):
        captured: dict = {}
        forward, iterate = self.model.forward, self.model._generate_iterative

        def first_forward(*a, **k):
            out = forward(*a, **k)
            captured.setdefault("logits", out.logits.float())
            return out

        def record_tokens(*a, **k):
            tokens = iterate(*a, **k)
            captured["tokens"] = tokens
            return tokens

        self.model.forward, self.model._generate_iterative = first_forward, record_tokens
        try:
            audio = self._generate(w, prompt, deterministic_config(w))
        finally:
            del self.model.forward, self.model._generate_iterative
        tokens = captured["tokens"][0].cpu()
        T = tokens.shape[-1]
        logits = captured["logits"]  # [2, 8, S, V]: row 0 cond (target at the end), row 1 uncond (target first)
        # one item: the batch is as long as the cond row, whose target is its last T positions
        cond = logits[0, :, -T:]
        return tokens, audio, torch.stack([cond, logits[1, :, :T]]).cpu()


def _allocated() -> int:
    return torch.cuda.memory_allocated() if torch.cuda.is_available() else 0


def ensure_random_checkpoint() -> str:
    """A full-size checkpoint with random weights (true shapes), made once into the user cache."""
    from engine.folders import user_folders

    folder = user_folders().cache / "random-full-size"
    if not (folder / "config.json").is_file():
        print(f"writing a full-size random-weight checkpoint to {folder} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "tools.make_checkpoint", "--full", str(folder)], check=True, cwd=ROOT)
    return str(folder)


def load_mode(name: str, model: str | None, device: str, random_weights: bool) -> ModeUnderTest | None:
    if random_weights and model is None:
        model = ensure_random_checkpoint()
    if name == "upstream":
        try:
            import omnivoice  # noqa: F401  (optional: only where torchaudio exists)
        except ImportError:
            return None
        return UpstreamMode(model, device)
    if name == "fp32":
        return EngineMode("fp32", model, device, "eager", dtype=torch.float32)
    if name in MODE_NAMES:
        return EngineMode(name, model, device, name)
    raise SystemExit(f"unknown mode {name}; choose from {', '.join(('upstream', *MODE_NAMES, 'fp32'))}")
