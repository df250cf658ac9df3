"""Which code a measurement ran: the commit id that benchmarks write beside their figures."""
import os
import subprocess
from pathlib import Path


def commit_id() -> str:
    """$VOICEDESK_COMMIT where set (a copied tree whose git data is stale, as on a lent GPU machine), else the
    checkout's short HEAD, else "unknown"."""
    if os.environ.get("VOICEDESK_COMMIT"):
        return os.environ["VOICEDESK_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except OSError:
        return "unknown"
