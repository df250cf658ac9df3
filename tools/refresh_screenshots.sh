#!/usr/bin/env bash
# Refresh the README's screenshots (assets/screenshots/*.png) from the browser tests, on the demo model.
# Usage: bash tools/refresh_screenshots.sh   (after `bash tests/run.sh` has made .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
VOICEDESK_SCREENSHOTS="$PWD/assets/screenshots" exec .venv/bin/python -m pytest -q tests/app/test_browser.py
