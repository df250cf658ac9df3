"""Speaker playback end to end: a PulseAudio null sink stands in for the speakers, its monitor
source is recorded, and the tone played through app/playback.py must arrive there."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RATE = 24000
TONE_HZ = 440.0

pytestmark = pytest.mark.skipif(shutil.which("pulseaudio") is None or shutil.which("parec") is None,
                                reason="pulseaudio and parec (Debian: pulseaudio, pulseaudio-utils) are needed "
                                       "for a virtual sound card")

PLAY = """
import numpy as np
from app.playback import SpeakerPlayer, probe
status = probe()
assert status.available, status.reason
name = next((d.name for d in status.devices if d.name == "pulse"), None)
player = SpeakerPlayer(24000, device=name)
t = np.arange(int(0.6 * 24000)) / 24000
for _ in range(3):  # three "sentences" with a render gap between them
    player.feed((0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32))
player.finish()
assert player.wait(10), "playback did not finish"
print("underflows", player.underflows)
"""


@pytest.fixture
def null_sink(tmp_path):
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "PULSE_SERVER"}  # talk to our daemon only
    env.update(XDG_RUNTIME_DIR=str(runtime), HOME=str(tmp_path))
    daemon = subprocess.Popen(
        ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--disable-shm=yes",
         "-L", "module-native-protocol-unix", "-L", "module-null-sink sink_name=vd_test rate=24000 channels=1",
         "-L", "module-always-sink"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while subprocess.run(["pactl", "info"], env=env, capture_output=True, check=False).returncode != 0:
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            pytest.fail(f"pulseaudio did not start: {daemon.stderr.read().decode()[-500:]}")
        time.sleep(0.1)
    subprocess.run(["pactl", "set-default-sink", "vd_test"], env=env, check=True)
    yield env
    daemon.terminate()
    daemon.wait(10)


def test_tone_reaches_the_speakers(null_sink, tmp_path):
    recording = tmp_path / "monitor.raw"
    with recording.open("wb") as out:
        recorder = subprocess.Popen(["parec", "-d", "vd_test.monitor", "--format=float32le", f"--rate={RATE}",
                                     "--channels=1", "--raw"], env=null_sink, stdout=out)
        try:
            time.sleep(0.3)
            played = subprocess.run([sys.executable, "-c", PLAY], env={**null_sink, "PYTHONPATH": str(ROOT)},
                                    cwd=ROOT, capture_output=True, check=False, text=True, timeout=60)
            time.sleep(0.5)
        finally:
            recorder.terminate()
            recorder.wait(10)
    assert played.returncode == 0, played.stderr[-2000:]

    signal = np.fromfile(recording, dtype=np.float32)
    loud = np.abs(signal) > 0.05
    assert loud.sum() > 0.5 * 3 * 0.6 * RATE, f"only {loud.sum() / RATE:.2f} s of sound arrived"
    start, end = np.flatnonzero(loud)[[0, -1]]
    heard = signal[start:end]
    spectrum = np.abs(np.fft.rfft(heard * np.hanning(len(heard))))
    peak_hz = np.fft.rfftfreq(len(heard), 1 / RATE)[spectrum.argmax()]
    assert abs(peak_hz - TONE_HZ) < 5, f"the loudest frequency was {peak_hz:.1f} Hz"
    rms = np.sqrt(np.mean(signal[start:start + RATE // 2] ** 2))
    assert 0.25 < rms < 0.45, f"level {rms:.3f} (a 0.5 sine has RMS 0.354)"
