"""Test-session setup that must happen before any test module is imported."""
import os
import tempfile

import torch

# Everything the app and the engine keep on disk (caches of quantized models and kernels included) goes to
# a throwaway folder, never into the user's real VoiceDesk folders.
os.environ.setdefault("VOICEDESK_HOME", tempfile.mkdtemp(prefix="voicedesk-tests-"))

if not torch.cuda.is_available():
    # Without a GPU, Triton kernels can only run in its interpreter, which Triton (its own reductions
    # included) picks when it is first imported: engine/ modules import kernels/, so set it here.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _checkout_changes() -> set[str] | None:
    """`git status --porcelain` lines of the checkout the tests run in (None outside a git checkout)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                          capture_output=True, text=True, check=False)
    return set(done.stdout.splitlines()) if done.returncode == 0 else None


def pytest_sessionstart(session):
    session.config._checkout_before = _checkout_changes()


def pytest_sessionfinish(session, exitstatus):
    """Tests write nothing inside the checkout: a run that leaves a new change in `git status` fails."""
    before = getattr(session.config, "_checkout_before", None)
    after = _checkout_changes()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        session.config.get_terminal_writer().line(
            "\nFAILED: the tests changed the checkout (`git status`):\n  " + "\n  ".join(new), red=True)
        session.exitstatus = 1
