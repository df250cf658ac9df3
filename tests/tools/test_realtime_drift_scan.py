"""The drift scan behind docs/realtime_check.md's demo table: no perturbation is no drift, a large one is."""
from tools.realtime_drift_scan import main


def test_the_scan_prints_one_row_per_scale(capsys):
    main(["--scales", "0", "0.5"])
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "| perturbation (x the spread) | tokens equal | mel dB | verdict |"
    assert rows[2] == "| 0 | 100.0 % | 0.00 | fine |"
    assert rows[3].startswith("| 0.5 | ") and rows[3].endswith(" | drift |") and len(rows) == 4
