"""One home for the facts the whole program shares: the codec's rates and token space, the released
checkpoint, and the demo checkpoint shipped in the package."""
from pathlib import Path

SAMPLE_RATE = 24_000  # Hz: the HiggsAudioV2 codec's rate; every waveform in the engine is at it
FRAME_RATE = 25  # audio frames (token columns) per second of the codec
NUM_CODEBOOKS = 8
CODEBOOK_SIZE = 1024  # token ids 0..1023 in every codebook; the LM's MASK id is CODEBOOK_SIZE

HUB_ID = "k2-fsa/OmniVoice"  # the released checkpoint, downloaded on first start
DOWNLOAD_GB = 2.5  # its size on disk, for the first-start message and the disk check

DEMO_MODEL = Path(__file__).resolve().parent / "data" / "demo_model"  # tiny random weights (--demo, tests)
DEMO_FLAG = "voicedesk_demo"  # config.json key that marks a checkpoint as the demo (its output is noise)
