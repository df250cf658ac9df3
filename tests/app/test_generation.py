"""The generation pipeline of the UI, in-process on the real Engine (tiny checkpoint), for what the
launched app cannot show: the whole-clip fallback without ffmpeg and speakers that are missing."""
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from app import generation, playback
from app.context import AppContext
from app.engine_host import EngineHost
from app.history import History
from app.library import VoiceLibrary
from app.playback import SpeakerStatus, SpeakersUnavailable
from app.settings import Settings
from app.storage import AppDirs
from app.worker import GpuWorker
from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL

TEXT = "One short clause, then. A second sentence follows."
STATUS, METRICS, WAV = 1, 3, 4


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    root = tmp_path_factory.mktemp("home")
    dirs = AppDirs(config=root / "config", data=root / "data", cache=root / "cache").create()
    worker = GpuWorker()
    host = EngineHost(worker, str(DEMO_MODEL))
    host.start("hifi")
    assert host.wait_ready(300).ready, host.state()
    yield AppContext(dirs=dirs, settings=Settings(), library=VoiceLibrary(dirs.voices), history=History(dirs.history),
                     worker=worker, host=host, speakers=SpeakerStatus(False, "none"), demo=True,
                     upload_root=dirs.uploads)
    worker.shutdown()


def request(speakers=False):
    return generation.GenerationRequest(TEXT, None, "female", None, GenerationConfig(num_step=4, seed=3), "designed",
                                        speakers, None)


def saved_wav(ctx, final) -> Path:
    """The history file the final update offers for download."""
    newest = ctx.history.entries()[-1].audio
    assert final[WAV].value["orig_name"] == newest.name
    return newest


def test_without_ffmpeg_the_whole_clip_arrives_at_the_end(ctx, monkeypatch):
    monkeypatch.setattr(ctx, "streaming", False)
    updates = list(generation.run(ctx, request(), "tester"))
    *during, (final, saved) = updates
    assert saved and not any(s for _, s in during)
    assert all(out[0] == {"__type__": "update"} for out, _ in during)  # nothing streamed
    rate, pcm = final[0]
    assert rate == 24000 and pcm.dtype == np.int16
    assert len(pcm) == sf.info(saved_wav(ctx, final)).frames
    assert "ffmpeg" in final[STATUS] and "Done" in final[STATUS]


def test_streaming_sends_int16_chunks_that_add_up_to_the_saved_wav(ctx):
    updates = list(generation.run(ctx, request(), "tester"))
    chunks = [out[0][1] for out, _ in updates if isinstance(out[0], tuple)]
    final, saved = updates[-1]
    assert saved and len(chunks) >= 2 and all(c.dtype == np.int16 for c in chunks)
    stored, _ = sf.read(saved_wav(ctx, final), dtype="int16")
    assert np.array_equal(np.concatenate(chunks), stored)
    assert final[METRICS]["chunks"] == len(chunks)


def test_missing_speakers_are_a_notice_not_a_failure(ctx, monkeypatch):
    def no_portaudio():
        raise SpeakersUnavailable("Speaker playback needs the PortAudio library; browser playback only.")

    monkeypatch.setattr(playback, "load_sounddevice", no_portaudio)
    final, saved = list(generation.run(ctx, request(speakers=True), "tester"))[-1]
    assert saved and "Done" in final[STATUS] and "browser playback only" in final[STATUS]
