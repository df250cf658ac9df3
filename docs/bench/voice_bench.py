"""What the voice library benches beside this file share (cpu-voice-entry, cpu-voice-list, cpu-voice-unused-name,
cpu-issue23-voice-lookup): a median timer and a library of saved voices of random tokens, host only, no model.
They import it as a sibling, run as their records say, from the root of the tree to time:
`PYTHONPATH=$PWD python docs/bench/<bench>.py` (Python puts the script's folder first on sys.path, so this file is
found beside the script; PYTHONPATH gives that tree's app and engine)."""
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from app.library import VoiceLibrary
from engine.constants import CODEBOOK_SIZE, FRAME_RATE, NUM_CODEBOOKS
from engine.voice import Voice


def median_ms(call: Callable[[], object], *, repeats: int) -> float:
    """The median time of `repeats` calls of `call`, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


@contextlib.contextmanager
def voice_library(seconds: Sequence[int]) -> Iterator[VoiceLibrary]:
    """A library in a temporary folder, removed afterwards, holding one voice a length in `seconds`: voice i is
    saved as "Voice i" (folder voice-i), says "Voice i." and has random codes seeded with i."""
    with tempfile.TemporaryDirectory() as tmp:
        library = VoiceLibrary(Path(tmp) / "voices")
        for i, length in enumerate(seconds):
            codes = torch.randint(0, CODEBOOK_SIZE, (NUM_CODEBOOKS, FRAME_RATE * length),
                                  generator=torch.Generator().manual_seed(i))
            library.save(f"Voice {i}", Voice(tokens=codes, transcript=f"Voice {i}.", rms=0.08))
        yield library


def print_versions() -> None:
    """The Python and torch versions, the last line of each bench's output."""
    print(sys.version.split()[0], torch.__version__)
