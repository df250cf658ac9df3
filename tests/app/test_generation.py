"""The generation pipeline of the UI, in-process on the real Engine (tiny checkpoint), for what the
launched app cannot show: the live samples against the saved file, and speakers that are missing."""
import asyncio
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
from saved_voices import counting_loads

from app import generation, playback
from app.clip_check import check_file
from app.context import AppContext
from app.engine_host import EngineHost
from app.history import History
from app.library import VoiceLibrary
from app.playback import SpeakerStatus, SpeakersUnavailable
from app.settings import Settings
from app.storage import AppDirs
from app.ui import clone
from app.ui.output import panel_updates
from app.worker import GpuWorker, outcome
from engine.config import GenerationConfig
from engine.constants import DEMO_MODEL
from tools.workloads import synthetic_voice

TEXT = "One short clause, then. A second sentence follows."
STATUS, METRICS = 1, 3  # places in the panel's OUTPUTS


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
    """The history file of the final update (its downloads are made from it)."""
    newest = ctx.history.entries()[-1]
    assert final[METRICS]["history_id"] == newest.id
    return newest.audio


def test_the_live_samples_add_up_to_the_saved_wav_and_the_player_gets_the_stored_file(ctx):
    live_id = "test-live-id-0123456789"
    with ctx.live_audio.publishing(live_id) as live:
        updates = list(panel_updates(ctx, generation.run(ctx, request(), "tester", live)))

    async def listen():
        return [piece async for piece in ctx.live_audio.listen(live_id).pieces()]

    pieces = asyncio.run(listen())
    final, saved = updates[-1]
    assert saved and len(pieces) >= 2
    stored, _ = sf.read(saved_wav(ctx, final), dtype="int16")
    assert np.array_equal(np.frombuffer(b"".join(pieces), "<i2"), stored)
    assert final[METRICS]["chunks"] == len(pieces)
    assert final[0] == str(saved_wav(ctx, final))  # served from where it is stored, not copied into a cache
    assert all(out[0] is not None and not isinstance(out[0], (bytes, str)) for out, _ in updates[:-1])  # skipped


def test_missing_speakers_are_a_notice_not_a_failure(ctx, monkeypatch):
    def no_portaudio():
        raise SpeakersUnavailable("Speaker playback needs the PortAudio library; browser playback only.")

    monkeypatch.setattr(playback, "load_sounddevice", no_portaudio)
    final, saved = list(panel_updates(ctx, generation.run(ctx, request(speakers=True), "tester")))[-1]
    assert saved and "Done" in final[STATUS] and "browser playback only" in final[STATUS]


def test_a_reference_cut_to_60_s_is_said_in_the_status(ctx, tmp_path, monkeypatch):
    from engine.audio import asr

    monkeypatch.setattr(asr, "transcribe", lambda wave, rate, device: "The part kept")  # the typed one is set aside
    clip = ctx.dirs.uploads / "long_talk.wav"
    sf.write(clip, synthetic_voice(65.0, seed=4), 24000)
    voice = outcome(ctx.voice_from_clip(str(clip), "A long talk, typed in full.", True, owner="tester"))
    assert voice.notes[0] == ("Only the first 60 s of this 65 s recording are used (a longer reference makes "
                              "generation slow and memory-hungry; 3-10 s works best).")
    cloned = generation.GenerationRequest("Hello.", voice, None, None, GenerationConfig(num_step=2, seed=1),
                                          "reference clip", False, None)
    final, saved = list(panel_updates(ctx, generation.run(ctx, cloned, "tester")))[-1]
    assert saved and "Done" in final[STATUS] and "Only the first 60 s of this 65 s recording" in final[STATUS]
    assert "Only the first 60 s of this 65 s recording are used" in check_file(str(clip))  # the clip check too


def test_clone_with_a_saved_voice_reads_it_once_and_names_it_in_the_history(ctx, monkeypatch):
    """The Clone button loaded the saved voice, then read its folder again (voice included) for its name."""
    clip = ctx.dirs.uploads / "reader.wav"
    sf.write(clip, synthetic_voice(3.0, seed=5), 24000)
    voice = outcome(ctx.voice_from_clip(str(clip), "A reader reading.", True, owner="tester"))
    saved = ctx.library.save("Careful Reader", voice)
    loaded = counting_loads(monkeypatch)
    run = clone._generate(ctx)
    updates = list(run(saved.slug, reference=None, transcript="", text="Hello.", language=None, speed=1.0,
                       duration=0, steps=4, guidance=2.0, denoise=True, seed=1, randomize=False, preprocess=True,
                       postprocess=True, pad=0.1, fade=0.1, normalize=False, speakers=False, device=None,
                       history_version=0, live_id="test-clone-live-id-0123456789",
                       request=SimpleNamespace(session_hash="tester")))
    assert "Done" in updates[-1][STATUS]
    assert loaded == [saved.folder]
    assert ctx.history.entries()[-1].meta["voice"] == "Careful Reader"
