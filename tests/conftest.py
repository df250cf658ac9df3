"""Test-session setup that must happen before any test module is imported."""
import os

import torch

if not torch.cuda.is_available():
    # Without a GPU, Triton kernels can only run in its interpreter, which Triton (its own reductions
    # included) picks when it is first imported: engine/ modules import kernels/, so set it here.
    os.environ.setdefault("TRITON_INTERPRET", "1")
