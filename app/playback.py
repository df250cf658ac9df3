"""Live playback on this computer's speakers (sounddevice / PortAudio), optional and fail-soft.

Chunks are played as they arrive: the output stream runs from the moment the player is made (silent
until the first chunk, so opening the device is not on the first sound's path), and the PortAudio
callback pops the chunks from a queue and fills silence while the next sentence is still being generated.
Without PortAudio (`libportaudio2` on Linux) or without an output device the app says "browser playback
only" and carries on.
"""
from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from engine.audio.resample import resample
from engine.errors import VoiceDeskError

log = logging.getLogger(__name__)

BLOCK_FRAMES = 1024
LATENCY_S = 0.05  # the device's buffer: the page's live player holds about as much (its jitter buffer)


class SpeakersUnavailable(VoiceDeskError):
    """No way to play on this computer's speakers; the message says why and what to install."""


@dataclass(frozen=True)
class OutputDevice:
    index: int
    name: str
    is_default: bool


@dataclass(frozen=True)
class SpeakerStatus:
    available: bool
    reason: str  # shown in the UI when not available
    devices: list[OutputDevice] = field(default_factory=list)


def load_sounddevice():
    """The sounddevice module, or SpeakersUnavailable with the fix in its message."""
    try:
        import sounddevice
    except ImportError as err:
        raise SpeakersUnavailable("Speaker playback needs the 'sounddevice' package (pip install sounddevice); "
                                  "browser playback only.") from err
    except OSError as err:  # the wheel loads libportaudio at import time
        raise SpeakersUnavailable("Speaker playback needs the PortAudio library (Debian/Ubuntu: "
                                  "sudo apt-get install libportaudio2); browser playback only.") from err
    return sounddevice


def probe(sd=None) -> SpeakerStatus:
    """What can be played on, without ever raising."""
    try:
        sd = sd or load_sounddevice()
        devices = list_output_devices(sd)
    except SpeakersUnavailable as err:
        return SpeakerStatus(False, str(err))
    except Exception as err:  # PortAudio reports driver trouble with its own exception types
        return SpeakerStatus(False, f"The audio system could not be queried ({err}); browser playback only.")
    if not devices:
        return SpeakerStatus(False, "No audio output device found on this computer; browser playback only.")
    return SpeakerStatus(True, "", devices)


def list_output_devices(sd) -> list[OutputDevice]:
    default_out = sd.default.device[1] if isinstance(sd.default.device, (list, tuple)) else sd.default.device
    return [OutputDevice(int(d["index"]), str(d["name"]), int(d["index"]) == default_out)
            for d in sd.query_devices() if d["max_output_channels"] > 0]


class SpeakerPlayer:
    """Plays float32 mono chunks on one output device as they are fed.

    `feed` may be called from any thread; `finish` lets the queued audio play out; `stop` cuts it. Raises
    SpeakersUnavailable when the device cannot be opened.
    """

    def __init__(self, sample_rate: int, device: str | None = None, sd=None):
        self._sd = sd or load_sounddevice()
        status = probe(self._sd)
        if not status.available:
            raise SpeakersUnavailable(status.reason)
        self._device = _device_index(status.devices, device)
        self._source_rate = sample_rate
        self.rate = _supported_rate(self._sd, self._device, sample_rate)
        self._chunks: queue.Queue[np.ndarray | None] = queue.Queue()
        self._current = np.zeros(0, np.float32)
        self.done = threading.Event()
        self.underflows = 0
        self._stream = self._start()

    def feed(self, chunk: np.ndarray) -> None:
        chunk = np.asarray(chunk, dtype=np.float32).reshape(-1)
        if self.rate != self._source_rate:
            chunk = resample(torch.from_numpy(chunk), self._source_rate, self.rate).numpy()
        self._chunks.put(chunk)  # the running stream's next callback plays it

    def finish(self) -> None:
        """No more audio: play what is queued, then close."""
        self._chunks.put(None)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the queued audio has played (True) or `timeout` passed (False)."""
        finished = self.done.wait(timeout)
        if finished:
            self._stream.close()
        return finished

    def stop(self) -> None:
        self._stream.abort()
        self._stream.close()
        self.done.set()

    def _start(self):
        try:
            stream = self._sd.OutputStream(
                samplerate=self.rate, channels=1, dtype="float32", blocksize=BLOCK_FRAMES, latency=LATENCY_S,
                device=self._device, callback=self._fill, finished_callback=self.done.set)
            stream.start()
            return stream
        except Exception as err:  # PortAudioError and friends: a device that vanished, a busy device
            self.done.set()
            raise SpeakersUnavailable(f"Cannot open the speakers ({err}); browser playback only.") from err

    def _fill(self, outdata, frames, time, status) -> None:
        # Runs on PortAudio's thread: no allocation-heavy work, never block, always fill the buffer.
        if status.output_underflow:
            self.underflows += 1
        filled, ended = 0, False
        while filled < frames:
            if len(self._current) == 0:
                try:
                    nxt = self._chunks.get_nowait()
                except queue.Empty:
                    break  # the next sentence is still being generated: play silence meanwhile
                if nxt is None:
                    ended = True
                    break
                self._current = nxt
            take = min(frames - filled, len(self._current))
            outdata[filled:filled + take, 0] = self._current[:take]
            self._current = self._current[take:]
            filled += take
        outdata[filled:] = 0
        if ended:
            raise self._sd.CallbackStop


def _device_index(devices: list[OutputDevice], name: str | None) -> int | None:
    """The index of the output device called `name`; None (the default) when it is gone."""
    if not name:
        return None
    for device in devices:
        if device.name == name:
            return device.index
    log.warning("output device %r not found: using the default output", name)
    return None


def _supported_rate(sd, device: int | None, rate: int) -> int:
    try:
        sd.check_output_settings(device=device, channels=1, dtype="float32", samplerate=rate)
        return rate
    except Exception:  # the device refuses this rate: use its own and resample
        try:
            info = sd.query_devices(device if device is not None else sd.default.device[1])
            return int(info["default_samplerate"])
        except Exception as err:
            raise SpeakersUnavailable(f"The output device cannot be used ({err}); browser playback only.") from err
