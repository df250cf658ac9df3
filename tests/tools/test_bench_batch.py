"""The batching tables' inputs and layout: long-form prose of the asked length, one row per measurement."""
from engine.text.chunk import stream_chunks
from tools.bench_batch import tables
from tools.workloads import WORDS_PER_MINUTE, prose


def test_prose_has_the_asked_minutes_of_words_in_many_pieces():
    for minutes in (1, 5):
        words = len(prose(minutes).split())
        assert minutes * WORDS_PER_MINUTE <= words < minutes * WORDS_PER_MINUTE + 25
    assert len(stream_chunks(prose(1))) >= 6  # enough pieces for groups to form (up to 12 s each)
    assert prose(2).startswith(prose(1)[:200])  # fixed order: every run speaks the same text


def test_tables_print_every_row():
    long_rows = [{"minutes": 1, "ahead": a, "audio_s": 78.0, "wall_s": w, "rtf": w / 78, "first_audio_s": 0.1,
                  "peak_gib": None} for a, w in ((1, 0.9), (16, 0.4))]
    take_rows = [{"workload": "baseline", "n": n, "median_s": 0.1 * n ** 0.5, "peak_gib": 3.0} for n in (1, 4)]
    agree = [{"workload": "baseline", "n": 4, "token_agreement": 1.0, "takes_identical": "4/4"},
             {"workload": "1 min streamed", "n": 9, "pieces_identical": "9/9"}]
    text = tables(long_rows, take_rows, agree)
    assert "| 1 min | one at a time | 78 | 0.90 | 0.0115 | 100 | - |" in text
    assert "| baseline | 4 | 200.0 | 2.00 | 3.00 |" in text and "| 1 min streamed | 9 pieces | - | 9/9 |" in text
