"""The page's first-sound report (app/ui/output.py): it names the generation it was measured for."""
from types import SimpleNamespace

import gradio as gr
import numpy as np

from app.history import History
from app.metrics import LiveMetrics
from app.ui.output import _heard_handler

THIS, BEFORE = "a" * 32, "b" * 32  # live ids: this generation's, the page's one before


def test_a_report_counts_only_for_the_generation_it_names(tmp_path):
    """A report of the page's generation before, reaching the app once the next one has begun, is not taken for
    the new one's; the new one's own is shown and stored."""
    history = History(tmp_path)
    entry = history.add(np.zeros(2400, np.int16), 24000, "Hello.")
    metrics = LiveMetrics(mode="High fidelity", backend="cpu", demo=True, live_id=THIS, history_id=entry.id)
    heard = _heard_handler(SimpleNamespace(live={"page": metrics}, history=history))
    page = SimpleNamespace(session_hash="page")

    assert heard(f"{BEFORE} 900", page) == gr.skip()
    assert metrics.heard_first_audio_s is None and "heard_first_audio_s" not in History(tmp_path).get(entry.id).meta
    assert heard("900", page) == gr.skip()  # no generation named

    assert "900 ms" in heard(f"{THIS} 900", page)
    assert metrics.heard_first_audio_s == 0.9
    assert History(tmp_path).get(entry.id).meta["heard_first_audio_s"] == 0.9
