#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian machine, then runs it.
# Usage: bash tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: ffmpeg (phone clips, Studio exports), chromium (browser tests), pulseaudio (a null
# sink for speaker playback tests), libportaudio2 (sounddevice).
SYSTEM_PACKAGES="ffmpeg chromium pulseaudio pulseaudio-utils libportaudio2"
missing=""
for p in $SYSTEM_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python
if ! command -v nvidia-smi >/dev/null 2>&1; then
    # No NVIDIA GPU: take the CPU build of torch, never the multi-GB CUDA one.
    "$VPY" -m pip install -q "torch==2.13.0"
fi
"$VPY" -m pip install -q -e ".[test]"

# pytest exit code 5 means "no tests collected": treat it as a failure like any other.
exec "$VPY" -m pytest -q "$@"
