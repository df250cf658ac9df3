"""tools/bench_tn.py: its text holds numbers to speak, and one small run prints a row that both ways agree on."""
from extras import needs_tn

from tools import bench_tn


def test_the_bench_text_is_prose_with_numbers_of_about_the_length_asked():
    text = bench_tn.bench_text(2000)
    assert 2000 <= len(text) < 2200 and "$1,250.75" in text and "Dec. 4, 2026" in text


@needs_tn
def test_one_run_prints_a_row(capsys):
    bench_tn.main(["--chars", "700", "--runs", "1"])
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].startswith("| characters") and rows[-1].startswith("| 7")
