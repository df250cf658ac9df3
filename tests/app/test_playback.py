import builtins
from types import SimpleNamespace

import numpy as np
import pytest

from app.playback import SpeakerPlayer, SpeakersUnavailable, probe


class CallbackStop(Exception):
    pass


class FakeSoundDevice:
    """Just enough of sounddevice: a device list and an OutputStream that never plays by itself."""

    CallbackStop = CallbackStop

    def __init__(self, devices, default=(-1, -1), rates=(24000,), fail_open=False):
        self.devices, self.rates, self.fail_open = devices, rates, fail_open
        self.default = SimpleNamespace(device=list(default))
        self.streams = []

    def query_devices(self, device=None):
        return self.devices if device is None else self.devices[device]

    def check_output_settings(self, device=None, channels=1, dtype="float32", samplerate=None):
        if samplerate not in self.rates:
            raise ValueError("Invalid sample rate")

    def OutputStream(self, **kwargs):
        if self.fail_open:
            raise RuntimeError("Error querying device -1")
        stream = SimpleNamespace(kwargs=kwargs, started=False, aborted=False, closed=False)
        stream.start = lambda: setattr(stream, "started", True)
        stream.abort = lambda: setattr(stream, "aborted", True)
        stream.close = lambda: setattr(stream, "closed", True)
        self.streams.append(stream)
        return stream


def device(index, name, outputs=2, rate=48000):
    return {"index": index, "name": name, "max_output_channels": outputs, "default_samplerate": rate}


def pull(player, frames):
    """Ask the player for `frames` samples the way PortAudio's callback would."""
    out = np.full((frames, 1), 9.0, np.float32)
    try:
        player._fill(out, frames, None, SimpleNamespace(output_underflow=False))
        return out[:, 0], False
    except CallbackStop:
        return out[:, 0], True


def test_without_portaudio_playback_is_browser_only(monkeypatch):
    real_import = builtins.__import__

    def no_portaudio(name, *args, **kwargs):
        if name == "sounddevice":
            raise OSError("PortAudio library not found")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_portaudio)
    status = probe()
    assert not status.available and "libportaudio2" in status.reason and "browser playback only" in status.reason
    with pytest.raises(SpeakersUnavailable, match="PortAudio"):
        SpeakerPlayer(24000)


def test_without_an_output_device_playback_is_browser_only():
    sd = FakeSoundDevice([device(0, "Mic", outputs=0)])
    status = probe(sd)
    assert not status.available and "No audio output device" in status.reason


def test_a_stream_that_cannot_open_is_reported_not_raised_as_a_crash():
    sd = FakeSoundDevice([device(0, "HDMI")], default=(0, 0), fail_open=True)
    with pytest.raises(SpeakersUnavailable, match="Cannot open the speakers"):
        SpeakerPlayer(24000, sd=sd)


def test_devices_are_listed_and_chosen_by_name():
    sd = FakeSoundDevice([device(0, "Mic", outputs=0), device(1, "HDMI"), device(2, "USB Speakers")],
                         default=(0, 1))
    status = probe(sd)
    assert [(d.name, d.is_default) for d in status.devices] == [("HDMI", True), ("USB Speakers", False)]
    player = SpeakerPlayer(24000, device="USB Speakers", sd=sd)
    player.finish()
    assert sd.streams[0].kwargs["device"] == 2 and sd.streams[0].kwargs["samplerate"] == 24000
    assert SpeakerPlayer(24000, device="Unplugged", sd=sd)._device is None  # gone: default output


def test_the_speakers_run_before_the_first_chunk_and_play_it_in_the_next_callback():
    """Opening the device is not on the first sound's path (it took a PortAudio open and a quarter second of
    audio before): the first sound waits at most one device buffer, about what the page's player holds."""
    sd = FakeSoundDevice([device(0, "HDMI")], default=(0, 0))
    player = SpeakerPlayer(24000, sd=sd)
    assert sd.streams[0].started and sd.streams[0].kwargs["latency"] <= 0.05
    out, _ = pull(player, 1024)
    assert np.all(out == 0.0)  # nothing yet: silence
    player.feed(np.full(480, 0.5, np.float32))  # 20 ms
    out, _ = pull(player, 1024)
    assert np.all(out[:480] == 0.5) and np.all(out[480:] == 0.0)


def test_callback_plays_chunks_in_order_zero_fills_gaps_and_stops_at_the_end():
    sd = FakeSoundDevice([device(0, "HDMI")], default=(0, 0))
    player = SpeakerPlayer(24000, sd=sd)
    player.feed(np.full(3000, 0.5, np.float32))
    player.feed(np.full(4000, 0.25, np.float32))

    out, stopped = pull(player, 4096)
    assert np.all(out[:3000] == 0.5) and np.all(out[3000:] == 0.25) and not stopped
    out, stopped = pull(player, 4096)  # 2904 left, then the next sentence is late: silence
    assert np.all(out[:2904] == 0.25) and np.all(out[2904:] == 0.0) and not stopped
    out, _ = pull(player, 1024)
    assert np.all(out == 0.0)
    player.feed(np.full(100, -0.5, np.float32))
    player.finish()
    out, stopped = pull(player, 1024)
    assert np.all(out[:100] == -0.5) and np.all(out[100:] == 0.0) and stopped


def test_a_device_that_refuses_24_khz_gets_resampled_audio():
    sd = FakeSoundDevice([device(0, "HDMI", rate=48000)], default=(0, 0), rates=(48000,))
    player = SpeakerPlayer(24000, sd=sd)
    assert player.rate == 48000
    player.feed(np.zeros(24000, np.float32))
    assert len(player._chunks.get_nowait()) == 48000 and sd.streams[0].kwargs["samplerate"] == 48000

